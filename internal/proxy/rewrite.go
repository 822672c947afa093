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

func newRewriter(p *runtime.Proxy, own *url.URL) rewriter {
	return rewriter{authority: p.Authority, short: len(p.Upstream.Hostname()), base: p.BasePath, own: own}
}

// authorityOf is runtime.Authority: the same comparison on both sides.
var authorityOf = runtime.Authority

// mapPath is the path rule of both rewrites: a path under the base keeps
// what follows the base, under Doppel's own path; any other path on the
// upstream's host keeps itself, under Doppel's own path.
func (rw *rewriter) mapPath(p string) string {
	return string(appendMappedPath(make([]byte, 0, len(rw.own.EscapedPath())+len(p)), rw, p))
}

// appendMappedPath appends what mapPath makes of p: the body's rewrite
// writes it straight into the new body, with no string made on the way.
func appendMappedPath[P string | []byte](dst []byte, rw *rewriter, p P) []byte {
	ownPath := rw.own.EscapedPath()
	switch n := len(rw.base); {
	case len(p) >= n && string(p[:n]) == rw.base:
		return append(append(dst, ownPath...), p[n:]...)
	case len(p)+1 == n && string(p) == rw.base[:n-1] && rw.base[n-1] == '/':
		return append(dst, strings.TrimSuffix(ownPath, "/")...)
	}
	return append(append(dst, strings.TrimSuffix(ownPath, "/")...), p...)
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
			!rw.names(scheme, b[i:end]) {
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
		out = appendMappedPath(out, rw, b[end:pathEnd])
		last, i = pathEnd, pathEnd
	}
	if out == nil {
		return b, false
	}
	return append(out, b[last:]...), true
}

// names reports whether hostport, found in a body after scheme://, is the
// upstream's authority: authorityOf(scheme, hostport) == rw.authority, the
// comparison the redirects make, but without a string made for the
// hostports that cannot be it, or for the upstream's own written in full.
// Either shortcut holds only for an authority of the plain host:port form
// in ASCII; for any other (an IPv6 literal, say) the comparison is made.
func (rw *rewriter) names(scheme string, hostport []byte) bool {
	host, port, plain := plainAuthority(rw.authority)
	if !plain {
		return authorityOf(scheme, string(hostport)) == rw.authority
	}
	// Written in full, in any case: the host's case is all that differs,
	// and the comparison lowers it.
	if len(hostport) == len(rw.authority) && hostport[len(host)] == ':' &&
		asciiEqualFold(hostport[:len(host)], host) && string(hostport[len(host)+1:]) == port {
		return true
	}
	// The comparison's host is a part of hostport, lowered: without the
	// host somewhere in it, in any case, hostport cannot match.
	if !asciiContainsFold(hostport, host) {
		return false
	}
	return authorityOf(scheme, string(hostport)) == rw.authority
}

// plainAuthority splits an authority of the form host:port, in ASCII, the
// host in lower case and holding no colon or bracket; plain is false for
// any other.
func plainAuthority(a string) (host, port string, plain bool) {
	i := strings.LastIndexByte(a, ':')
	if i <= 0 || i == len(a)-1 {
		return "", "", false
	}
	for j := 0; j < len(a); j++ {
		c := a[j]
		if c >= 0x80 || c >= 'A' && c <= 'Z' || j < i && (c == ':' || c == '[' || c == ']') {
			return "", "", false
		}
	}
	return a[:i], a[i+1:], true
}

// asciiEqualFold compares b and s, ASCII letters in either case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lowerASCII(b[i]) != lowerASCII(s[i]) {
			return false
		}
	}
	return true
}

// asciiContainsFold reports whether b holds s, ASCII letters in either case.
func asciiContainsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if asciiEqualFold(b[i:i+len(s)], s) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
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
	buf, err := readPrefix(res.Body, limit+1, res.ContentLength)
	if err != nil {
		return err
	}
	if int64(len(buf)) > limit {
		res.Body = readCloser{io.MultiReader(bytes.NewReader(buf), res.Body), res.Body}
		return nil
	}
	_ = res.Body.Close()
	out, changed := rw.body(buf)
	body := &bufferedBody{}
	body.Reset(out)
	res.Body = body
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

// readPrefix is io.ReadAll(io.LimitReader(r, n)): r to its end, or its
// first n bytes. A body whose length is known (size, -1 when not) is read
// into one buffer of that length and a byte more, room for the read that
// finds the end, where io.ReadAll would grow its buffer from 512 bytes.
func readPrefix(r io.Reader, n, size int64) ([]byte, error) {
	c := int64(512)
	if size >= 0 && size < n {
		c = size + 1
	}
	b := make([]byte, 0, max(0, min(c, n)))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
	return b, nil
}

// bufferedBody is a buffered answer's body: one allocation, where
// io.NopCloser over a bytes.Reader would be two.
type bufferedBody struct{ bytes.Reader }

func (*bufferedBody) Close() error { return nil }

type readCloser struct {
	io.Reader
	io.Closer
}
