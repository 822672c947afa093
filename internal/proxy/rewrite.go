package proxy

import (
	"bytes"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/doppelproxy/doppel/internal/jinja"
	"github.com/doppelproxy/doppel/internal/render"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// Keeping the client behind the proxy: a redirect or a body naming the
// upstream's own address would send the client straight to the backend,
// past every fault and mock. Both are rewritten to name Doppel instead.

// External is Doppel's own address as clients reach it: a fixed URL, or a
// template over the system variables rendered per request.
type External struct {
	fixed *url.URL
	tpl   *jinja.Template
	raw   string
}

// NewExternal parses an external address. A value holding `{{` is a
// template; its scheme was checked to be literal when it was configured.
func NewExternal(raw string) (*External, error) {
	if strings.Contains(raw, "{{") {
		t, err := jinja.Compile(raw)
		if err != nil {
			return nil, err
		}
		return &External{tpl: t, raw: raw}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	return &External{fixed: withDirectoryPath(u), raw: raw}, nil
}

// ListenerExternal is the address when none is configured: the listener's
// own, with a wildcard bind (0.0.0.0, ::) read as loopback, under scheme
// (http, or https when the listener serves TLS).
func ListenerExternal(scheme, addr string) *External {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	hostport := host
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	u := &url.URL{Scheme: scheme, Host: hostport, Path: "/"}
	return &External{fixed: u, raw: u.String()}
}

func (e *External) String() string { return e.raw }

// externalFor is the address for one request; nil when a template fails,
// which means no rewriting for that request (never an error answer).
func (h *Handler) externalFor(ex *exchange) *url.URL {
	e := h.external
	if e == nil {
		return nil
	}
	if e.fixed != nil {
		return e.fixed
	}
	sys := system(ex)
	out, err := e.tpl.ExecuteToBytes(render.SystemVars(ex.proxy.Name, ex.rec.Mock, ex.req.Method, &sys))
	if err != nil {
		h.log.Debug("external_url did not render; no rewriting for this request", "request_id", ex.rec.RequestID, "error", err.Error())
		return nil
	}
	u, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		h.log.Debug("external_url rendered no absolute http(s) URL; no rewriting for this request", "request_id", ex.rec.RequestID, "rendered", string(out))
		return nil
	}
	return withDirectoryPath(u)
}

func withDirectoryPath(u *url.URL) *url.URL {
	c := *u
	c.RawQuery, c.Fragment, c.RawFragment, c.ForceQuery = "", "", "", false
	p := c.EscapedPath()
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	c.RawPath = p
	c.Path, _ = url.PathUnescape(p)
	return &c
}

// rewriter maps the upstream's addresses to Doppel's for one response.
type rewriter struct {
	authority string   // the upstream's host:port, lower case, port explicit
	short     int      // the length of the authority written without its port
	base      string   // the upstream's base path, escaped, ending in "/"
	own       *url.URL // Doppel's address, path ending in "/"
}

func newRewriter(p *runtime.Proxy, own *url.URL) *rewriter {
	return &rewriter{authority: p.Authority, short: len(p.Upstream.Hostname()), base: p.BasePath, own: own}
}

// authorityOf is runtime.Authority: the same comparison on both sides.
var authorityOf = runtime.Authority

// mapPath is the path rule of both rewrites: a path under the base keeps
// what follows the base, under Doppel's own path; any other path on the
// upstream's host keeps itself, under Doppel's own path.
func (rw *rewriter) mapPath(p string) string {
	ownPath := rw.own.EscapedPath()
	switch {
	case strings.HasPrefix(p, rw.base):
		return ownPath + p[len(rw.base):]
	case p+"/" == rw.base:
		return strings.TrimSuffix(ownPath, "/")
	}
	return strings.TrimSuffix(ownPath, "/") + p
}

// location rewrites a Location value resolved against the upstream request
// URL; a target on any other host is left as it was, byte for byte.
func (rw *rewriter) location(value string, request *url.URL) (string, bool) {
	loc, err := url.Parse(value)
	if err != nil {
		return value, false
	}
	target := request.ResolveReference(loc)
	if (target.Scheme != "http" && target.Scheme != "https") || authorityOf(target.Scheme, target.Host) != rw.authority {
		return value, false
	}
	out := url.URL{
		Scheme:      rw.own.Scheme,
		Host:        rw.own.Host,
		RawQuery:    target.RawQuery,
		ForceQuery:  target.ForceQuery,
		Fragment:    target.Fragment,
		RawFragment: target.RawFragment,
	}
	out.RawPath = rw.mapPath(target.EscapedPath())
	out.Path, _ = url.PathUnescape(out.RawPath)
	return out.String(), true
}

// body replaces every occurrence of the upstream's address in b: an
// absolute http(s) URL whose authority is exactly the upstream's host and
// port. A longer host (api.example.com.evil.test) or another one
// (cdn.api.example.com) is left alone. One linear scan, no regex.
func (rw *rewriter) body(b []byte) ([]byte, bool) {
	var out []byte
	last, i := 0, 0
	for {
		j := bytes.Index(b[i:], []byte("://"))
		if j < 0 {
			break
		}
		sep := i + j
		i = sep + 3
		scheme, start := schemeBefore(b, sep)
		if scheme == "" {
			continue
		}
		end := i
		for end < len(b) && isAuthorityByte(b[end]) {
			end++
		}
		// Most absolute URLs name other hosts: a length check refuses them
		// before anything is allocated.
		if n := end - i; n == 0 || (n != len(rw.authority) && n != rw.short) ||
			authorityOf(scheme, string(b[i:end])) != rw.authority {
			continue
		}
		pathEnd := end
		for pathEnd < len(b) && isPathByte(b[pathEnd]) {
			pathEnd++
		}
		if out == nil {
			out = make([]byte, 0, len(b)+len(b)/8)
		}
		out = append(out, b[last:start]...)
		out = append(out, rw.own.Scheme...)
		out = append(out, "://"...)
		out = append(out, rw.own.Host...)
		out = append(out, rw.mapPath(string(b[end:pathEnd]))...)
		last, i = pathEnd, pathEnd
	}
	if out == nil {
		return b, false
	}
	return append(out, b[last:]...), true
}

// schemeBefore reads "http" or "https" (any case) ending at sep, not part of
// a longer word, and returns it with its start.
func schemeBefore(b []byte, sep int) (string, int) {
	for _, s := range []string{"https", "http"} {
		start := sep - len(s)
		if start < 0 || !strings.EqualFold(string(b[start:sep]), s) {
			continue
		}
		if start > 0 && isWordByte(b[start-1]) {
			return "", 0
		}
		return strings.ToLower(s), start
	}
	return "", 0
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// isAuthorityByte: what a host[:port] may hold (no userinfo: an address
// with credentials is not rewritten).
func isAuthorityByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_' || c == '%'
}

// isPathByte: what a URL path may hold before its query, fragment or end.
func isPathByte(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune("?#\"'<>`\\{}|^", rune(c))
}

// rewritable reports a text body that is not encoded: text/*, JSON,
// JavaScript, XML, and the +json and +xml types.
func rewritable(h http.Header) bool {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return false
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/javascript", "application/x-javascript",
		"application/ecmascript", "application/xml":
		return true
	}
	return false
}

// rewriteBody buffers at most limit bytes of res's body. A body that fits
// is rewritten and sent with its new length, without the validators and
// digests of the old bytes; a larger one goes on wholly unmodified: the
// buffered prefix as received, then the rest, streamed.
func (rw *rewriter) rewriteBody(res *http.Response, limit int64) error {
	buf, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(buf)) > limit {
		res.Body = readCloser{io.MultiReader(bytes.NewReader(buf), res.Body), res.Body}
		return nil
	}
	_ = res.Body.Close()
	out, changed := rw.body(buf)
	res.Body = io.NopCloser(bytes.NewReader(out))
	if !changed {
		return nil
	}
	for _, h := range []string{"Etag", "Content-Md5", "Digest", "Repr-Digest"} {
		res.Header.Del(h)
	}
	res.ContentLength = int64(len(out))
	res.Header.Set("Content-Length", strconv.Itoa(len(out)))
	res.Header.Del("Transfer-Encoding")
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
