// Package record turns what the request journal kept of a proxy's
// forwarded exchanges into mocks (SPEC §17.6): one per distinct method and
// path, the latest answer winning, with its status, its end-to-end
// headers, its body rendered verbatim, and a latency taken from what the
// upstream really took.
package record

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/doppelproxy/doppel/internal/journal"
)

// Limits are what the recorded mocks must fit.
type Limits struct {
	// Bodies is journal.bodies: an answer cut there cannot be recorded.
	Bodies int
	// Headers is journal.headers: a header value cut there is left out.
	Headers int
	// BodyLimit is the proxy's body_limit.
	BodyLimit int
	// Taken are the mock names the proxy already has.
	Taken []string
}

// Result is what recording found.
type Result struct {
	// Mocks are the proxy document's mocks, as JSON values.
	Mocks []map[string]any
	// Exchanges is how many journal entries they were made from.
	Exchanges int
	// Note says which mocks leave out headers the journal cut; "" when
	// none does.
	Note string
}

// Mocks makes the mocks of entries (one proxy's, any order). Entries that
// are not a forwarded answer the client got whole (a mock's, a fault's,
// one cut or dropped) are passed over.
func Mocks(entries []*journal.Entry, lim Limits) (Result, error) {
	type group struct {
		latest   *journal.Entry
		min, max float64 // upstream ms
		n        int
	}
	groups := map[[2]string]*group{}
	var keys [][2]string
	for _, e := range entries {
		if !recordable(e) {
			continue
		}
		k := [2]string{e.Method, e.Path}
		g := groups[k]
		if g == nil {
			g = &group{min: *e.UpstreamMS, max: *e.UpstreamMS}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		g.min, g.max = min(g.min, *e.UpstreamMS), max(g.max, *e.UpstreamMS)
		if g.latest == nil || e.Seq() > g.latest.Seq() {
			g.latest = e
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[1], b[1]); c != 0 {
			return c
		}
		return strings.Compare(a[0], b[0])
	})
	taken := map[string]bool{}
	for _, n := range lim.Taken {
		taken[n] = true
	}
	var res Result
	var cut []string
	for _, k := range keys {
		g := groups[k]
		m, err := mock(g.latest, lim, taken)
		if err != nil {
			return Result{}, err
		}
		if names, leftOut := g.latest.ResponseHeaders.Cut(); len(names) > 0 || leftOut {
			what := strings.Join(names, ", ")
			if leftOut {
				what = strings.TrimPrefix(what+" and the headers it did not keep", " and ")
			}
			cut = append(cut, fmt.Sprintf("%s leaves out %s", m["name"], what))
		}
		m["proxy"] = map[string]any{"latency": map[string]any{
			"percentage": 1, "min": seconds(g.min), "max": seconds(g.max),
		}}
		res.Mocks = append(res.Mocks, m)
		res.Exchanges += g.n
	}
	if len(cut) > 0 {
		res.Note = fmt.Sprintf("the journal cut headers of the answers at journal.headers = %d bytes, and a mock never repeats a header cut: %s; raise journal.headers to record them whole",
			lim.Headers, strings.Join(cut, "; "))
	}
	return res, nil
}

// recordable: a forwarded exchange whose answer reached the client whole.
func recordable(e *journal.Entry) bool {
	return e.Mock == nil && e.UpstreamMS != nil && !e.Fault.Loss && !e.Fault.Hang && e.Fault.Abort == nil &&
		e.Status >= 200 && e.Status <= 599 && e.Status != http.StatusSwitchingProtocols
}

func mock(e *journal.Entry, lim Limits, taken map[string]bool) (map[string]any, error) {
	what := fmt.Sprintf("the answer to %s %s (journal entry %s)", e.Method, e.Path, e.ID)
	if e.ResponseBodyTruncated {
		return nil, fmt.Errorf("%s is cut in the journal at journal.bodies = %d bytes: raise journal.bodies to record it, or leave it out with match", what, lim.Bodies)
	}
	body := []byte(e.ResponseBody)
	if len(body) > lim.BodyLimit {
		return nil, fmt.Errorf("%s is %d bytes, over the proxy's body_limit of %d: raise body_limit to record it, or leave it out with match", what, len(body), lim.BodyLimit)
	}
	resp := map[string]any{"status": int(e.Status)}
	if h := headers(e.ResponseHeaders); len(h) > 0 {
		resp["headers"] = h
	}
	switch {
	case len(body) == 0:
	case !utf8.Valid(body):
		resp["body"] = Bytes(body)
	case json.Valid(body):
		resp["json"] = Verbatim(string(body))
	default:
		resp["body"] = Verbatim(string(body))
	}
	return map[string]any{
		"name":     name(e.Method, e.Path, taken),
		"request":  map[string]any{"method": e.Method, "url": "^" + regexp.QuoteMeta(e.Path) + "$"},
		"response": resp,
	}, nil
}

// dropped are the answer's headers a mock does not repeat: the server's
// own framing and date, hop-by-hop fields, and what Doppel adds.
var dropped = []string{
	"Date", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Proxy-Connection",
	"Proxy-Authenticate", "Te", "Trailer", "Upgrade", "X-Request-Id", "X-Doppel-Fault",
}

// headers are the end-to-end headers, each as a template rendering its
// value (values of a repeated header joined with ", "); a secret the
// journal masked is left out, never recorded as its mask, and so is a
// header whose value journal.headers cut.
func headers(h journal.Headers) map[string]string {
	out := map[string]string{}
	cut, _ := h.Cut()
	for name, vs := range h.Header() {
		if slices.Contains(dropped, http.CanonicalHeaderKey(name)) || slices.Contains(vs, journal.Masked) || slices.Contains(cut, name) {
			continue
		}
		out[name] = Verbatim(strings.Join(vs, ", "))
	}
	return out
}

// Verbatim is text as a Jinja2 template that renders it unchanged, and
// as readable as the text: each `{` that would open a tag, an expression
// or a comment (with what follows it here) is written as the expression
// {{ "{" }}; a carriage return, which the template reader turns
// into a newline, as {{ "\r" }}; and a last newline, which it drops, as
// {{ "\n" }}.
func Verbatim(s string) string {
	if !strings.ContainsAny(s, "{\r") && !strings.HasSuffix(s, "\n") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '{' && i+1 < len(s) && opensTag(s, i+1):
			b.WriteString(`{{ "{" }}`)
		case c == '\r':
			b.WriteString(`{{ "\r" }}`)
		case c == '\n' && i == len(s)-1:
			b.WriteString(`{{ "\n" }}`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Bytes is any body, text or not, as a Jinja2 template that renders it
// byte for byte: one string literal, printable ASCII as itself and every
// other byte (the quote and the backslash too) as \xNN.
func Bytes(b []byte) string {
	var s strings.Builder
	s.Grow(len(b)*2 + 8)
	s.WriteString(`{{ "`)
	const hex = "0123456789abcdef"
	for _, c := range b {
		switch {
		case c >= 0x20 && c < 0x7f && c != '"' && c != '\\':
			s.WriteByte(c)
		default:
			s.WriteString(`\x`)
			s.WriteByte(hex[c>>4])
			s.WriteByte(hex[c&15])
		}
	}
	s.WriteString(`" }}`)
	return s.String()
}

// opensTag reports whether a `{` before s[i] would open something: s[i]
// is one of `{%#`, or is written as an expression itself (a carriage
// return, the last newline).
func opensTag(s string, i int) bool {
	switch s[i] {
	case '{', '%', '#', '\r':
		return true
	case '\n':
		return i == len(s)-1
	}
	return false
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// name is a mock name for method and path, not in taken (which it joins).
func name(method, path string, taken map[string]bool) string {
	slug := strings.Trim(nonName.ReplaceAllString(path, "-"), "-")
	if slug == "" {
		slug = "root"
	}
	base := "rec-" + strings.ToLower(method) + "-" + slug
	if len(base) > 56 {
		base = strings.TrimRight(base[:56], "-")
	}
	n := base
	for i := 2; taken[n]; i++ {
		n = base + "-" + strconv.Itoa(i)
	}
	taken[n] = true
	return n
}

// seconds is milliseconds as seconds, to the tenth of a millisecond and
// never below 0.0001: an upstream that answered within a millisecond
// still took that long, and the replay is as fast, not instant.
func seconds(ms float64) float64 { return max(math.Round(ms*10), 1) / 10000 }
