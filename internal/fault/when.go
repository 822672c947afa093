package fault

import (
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
)

// A Condition narrows the requests a fault may fire on (SPEC §17.3):
// headers that must match, then a count per key and a window of time,
// kept in the proxy's Counters. The fault's share applies to what it
// admits.
type Condition struct {
	headers []headerMatch
	// count: which of a key's admitted requests pass; zero kind when
	// there is no count.
	kind countKind
	n    uint64
	// per: the header whose value is the key (canonical), or the client.
	perHeader string
	perClient bool
	// window, in time since the key's first request, when windowed.
	from, span time.Duration
	windowed   bool

	scope    Scope
	counters *Counters
}

type headerMatch struct {
	name string // canonical
	re   *regexp.Regexp
}

type countKind uint8

const (
	countNone countKind = iota
	countFirst
	countEvery
	countAfter
)

// NewCondition compiles w for the fault of that name (mock "" for a
// proxy's own), counting in counters; nil when w is nil.
func NewCondition(w *config.When, mock, name string, counters *Counters) *Condition {
	if w == nil {
		return nil
	}
	c := &Condition{scope: Scope{Mock: mock, Fault: name}, counters: counters}
	for h, p := range w.Headers {
		c.headers = append(c.headers, headerMatch{name: http.CanonicalHeaderKey(string(h)), re: p.Regexp()})
	}
	if k := w.Count; k != nil {
		switch {
		case k.First != nil:
			c.kind, c.n = countFirst, uint64(*k.First)
		case k.Every != nil:
			c.kind, c.n = countEvery, uint64(*k.Every)
		case k.After != nil:
			c.kind, c.n = countAfter, uint64(*k.After)
		}
	}
	if p := w.Per; p != nil {
		c.perHeader = http.CanonicalHeaderKey(string(p.Header))
		c.perClient = p.Client != ""
	}
	if win := w.Window; win != nil {
		c.from, c.span, c.windowed = seconds(float64(win.From)), seconds(float64(*win.For)), true
	}
	return c
}

// Admits reports whether the fault may fire on r: its headers match, and
// when counted, it falls in the count and the window; and where it was
// counted. Only the requests the headers admit are counted.
func (c *Condition) Admits(r *http.Request, now time.Time) (bool, Where) {
	for _, h := range c.headers {
		v, ok := r.Header[h.name]
		if !ok || len(v) == 0 || !h.re.MatchString(v[0]) {
			return false, Here
		}
	}
	if c.kind == countNone && !c.windowed {
		return true, Here
	}
	n, first, where := c.counters.Count(r.Context(), &c.scope, c.key(r), now)
	return c.passes(n, first, now), where
}

// passes says whether the nth request of a key, the first at first,
// falls in the count and the window.
func (c *Condition) passes(n uint64, first, now time.Time) bool {
	switch c.kind {
	case countFirst:
		if n > c.n {
			return false
		}
	case countEvery:
		if n%c.n != 0 {
			return false
		}
	case countAfter:
		if n <= c.n {
			return false
		}
	}
	if c.windowed {
		if since := now.Sub(first); since < c.from || since >= c.from+c.span {
			return false
		}
	}
	return true
}

// key is what r is counted under: the per header's value, the client's
// IP, or "" (the whole proxy, or a request without the header).
func (c *Condition) key(r *http.Request) string {
	switch {
	case c.perHeader != "":
		if v := r.Header[c.perHeader]; len(v) > 0 {
			return v[0]
		}
		return ""
	case c.perClient:
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			return host
		}
		return r.RemoteAddr
	}
	return ""
}

// conditioned is a fault under a condition: the same fault, rolled only
// on the requests the condition admits.
type conditioned struct {
	Fault
	when *Condition
}

// Detail passes the fault's own detail through.
func (c *conditioned) Detail() string {
	if d, ok := c.Fault.(Detailed); ok {
		return d.Detail()
	}
	return ""
}

// Unconditioned is f without a condition it may carry.
func Unconditioned(f Fault) Fault {
	if c, ok := f.(*conditioned); ok {
		return c.Fault
	}
	return f
}

// Counts reports whether a fault of the set keeps counters.
func (s Set) Counts() bool {
	for _, f := range s {
		if c, ok := f.(*conditioned); ok && (c.when.kind != countNone || c.when.windowed) {
			return true
		}
	}
	return false
}
