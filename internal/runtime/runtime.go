// Package runtime is a configuration document compiled for the request
// path: everything a request needs is derived once, here, so that serving
// a request parses, compiles and looks up nothing by scanning documents.
// A Runtime is immutable once built; a new document makes a new Runtime,
// swapped in whole through a Holder.
package runtime

import (
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/render"
)

// Runtime is one compiled configuration.
type Runtime struct {
	Document *config.Document
	Revision config.Revision
	// Proxies are the http proxies, in configuration order (the tcp ones
	// are the document's, run by internal/tcp).
	Proxies []*Proxy
	// Default is the proxy that takes unclaimed requests, if any.
	Default *Proxy
	// byHeader are the header-resolved proxies, in configuration order.
	byHeader []*Proxy
	// ResolutionHeaders are every resolution header (canonical form),
	// removed from every forwarded request.
	ResolutionHeaders []string
	// AdminHeader is the header admin tokens travel in (canonical form),
	// and AdminTokens the document's tokens by digest: a request to the
	// proxy listener carrying one has it removed, so an admin credential
	// never reaches an upstream or a mock.
	AdminHeader string
	// SessionHeader carries a request's session id (canonical form).
	SessionHeader string
	AdminTokens   map[config.TokenDigest]string
}

// Proxy is one compiled proxy.
type Proxy struct {
	Name     string
	Config   *config.Proxy
	Upstream *url.URL
	// BasePath is the upstream path as a directory, escaped, ending in "/".
	BasePath string
	// Authority is the upstream's host:port as Authority writes it, for
	// recognising the upstream's own address in what it answers.
	Authority string
	// ResolveHeader is the canonical header that selects this proxy, or ""
	// for the default.
	ResolveHeader string
	Timeout       time.Duration
	// Inject are the configured headers, keys canonical, set on every
	// forwarded request over the client's.
	Inject http.Header
	// Faults are the proxy's own, for the requests it forwards.
	Faults  fault.Set
	Replace fault.Replace
	// Mocks in document order; the first match wins.
	Mocks []*Mock
	// Revision is the proxy's own fingerprint: what it carries from one
	// runtime to the next is kept only while it is unchanged.
	Revision config.Revision
	// Attempts counts the request ids it has seen, for seeded rolls. It
	// outlives a reload that leaves the proxy unchanged (Inherit).
	Attempts *fault.Attempts
	// Counters are its faults' conditions' counts (SPEC §17.3); like
	// Attempts they outlive a reload that leaves the proxy unchanged.
	Counters *fault.Counters
	// Counted says some fault of the proxy or of its mocks keeps
	// counters: only then is Counters asked whether it forgot a key.
	Counted bool
}

// Mock is one compiled mock, with the faults that apply when it answers
// already resolved: replace is its own else the proxy's; of each fault its
// own, and for an inherited kind (latency) the proxy's when it has none
// (fault.CompileMock).
type Mock struct {
	Name    string
	Method  string
	Pattern *regexp.Regexp
	Replace fault.Replace
	Faults  fault.Set
	Render  *render.Mock
	// Hits counts the requests this mock was chosen for (its replace roll
	// fired), for the metrics.
	Hits atomic.Uint64
}

// Match finds the first mock whose method equals method and whose pattern
// matches path (a leading run of slashes already collapsed to one), with
// the pattern's submatches.
func (p *Proxy) Match(method, path string) (*Mock, []string) {
	for _, m := range p.Mocks {
		if m.Method != method {
			continue
		}
		if sub := m.Pattern.FindStringSubmatch(path); sub != nil {
			return m, sub
		}
	}
	return nil, nil
}

// Compile builds a Runtime from a valid, normalised document.
func Compile(doc *config.Document) (*Runtime, error) {
	rev, err := config.DocumentRevision(doc)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{Document: doc, Revision: rev, AdminHeader: textproto.CanonicalMIMEHeaderKey(string(doc.Admin.Auth.Header)),
		SessionHeader: textproto.CanonicalMIMEHeaderKey(string(config.SessionHeaderOf(doc)))}
	if len(doc.Admin.Tokens) > 0 {
		rt.AdminTokens = make(map[config.TokenDigest]string, len(doc.Admin.Tokens))
		for _, t := range doc.Admin.Tokens {
			rt.AdminTokens[config.DigestOf(string(t.Token))] = string(t.Name)
		}
	}
	for i := range doc.Proxies {
		if doc.Proxies[i].Type == config.KindTCP {
			continue // no request reaches it: internal/tcp runs it
		}
		p, err := compileProxy(&doc.Proxies[i])
		if err != nil {
			return nil, err
		}
		rt.Proxies = append(rt.Proxies, p)
		if p.ResolveHeader == "" {
			if rt.Default == nil {
				rt.Default = p
			}
			continue
		}
		rt.byHeader = append(rt.byHeader, p)
		if !slices.Contains(rt.ResolutionHeaders, p.ResolveHeader) {
			rt.ResolutionHeaders = append(rt.ResolutionHeaders, p.ResolveHeader)
		}
	}
	return rt, nil
}

// CompileOverlay compiles a session's overlay laid over base into a proxy
// of its own: the overlay's mocks first, its faults instead of base's,
// and counters of its own (SPEC §17.5).
func CompileOverlay(base *config.Proxy, o *config.SessionProxy) (*Proxy, error) {
	p, err := compileProxy(o.Over(base))
	if err != nil {
		return nil, err
	}
	// A thousand sessions each counting as many keys as a proxy would
	// be a hundred million: an overlay keeps fewer.
	p.Counters.Bound(MaxSessionCounterKeys)
	return p, nil
}

// MaxSessionCounterKeys is how many counter keys a session's overlay of
// one proxy keeps (the newest), where a proxy keeps fault.MaxCounterKeys.
const MaxSessionCounterKeys = 1000

func compileProxy(c *config.Proxy) (*Proxy, error) {
	u := *c.URL.URL()
	base := u.EscapedPath()
	if base == "" || base[len(base)-1] != '/' {
		base += "/"
	}
	p := &Proxy{
		Name:      string(c.Name),
		Config:    c,
		Upstream:  &u,
		BasePath:  base,
		Authority: Authority(u.Scheme, u.Host),
		Timeout:   time.Duration(c.Timeout) * time.Second,
		Replace:   fault.Replace(*c.Replace),
		Attempts:  fault.NewAttempts(),
		Counters:  fault.NewCounters(),
	}
	p.Faults = fault.Compile(c.Faults(), p.Counters)
	rev, err := config.ProxyRevision(c)
	if err != nil {
		return nil, err
	}
	p.Revision = rev
	if c.Resolve.Type == config.ResolveHeader {
		p.ResolveHeader = textproto.CanonicalMIMEHeaderKey(string(c.Resolve.Header))
	}
	if len(c.Headers) > 0 {
		p.Inject = make(http.Header, len(c.Headers))
		for k, v := range c.Headers {
			p.Inject.Set(string(k), string(v))
		}
	}
	for i := range c.Mocks {
		m, err := compileMock(p, &c.Mocks[i])
		if err != nil {
			return nil, fmt.Errorf("proxy %s: %w", p.Name, err)
		}
		p.Mocks = append(p.Mocks, m)
		p.Counted = p.Counted || m.Faults.Counts()
	}
	p.Counted = p.Counted || p.Faults.Counts()
	return p, nil
}

func compileMock(p *Proxy, c *config.Mock) (*Mock, error) {
	r, err := render.Compile(p.Name, c)
	if err != nil {
		return nil, err
	}
	m := &Mock{
		Name:    string(c.Name),
		Method:  string(c.Request.Method),
		Pattern: c.Request.URL.Regexp(),
		Replace: p.Replace,
		Render:  r,
	}
	var own *config.Faults
	if o := c.Proxy; o != nil {
		if o.Replace != nil {
			m.Replace = fault.Replace(*o.Replace)
		}
		f := o.Faults()
		own = &f
	}
	m.Faults = fault.CompileMock(p.Config.Faults(), own, m.Name, p.Counters)
	return m, nil
}

// Authority is host:port in lower case with the scheme's default port made
// explicit, so https://h and https://h:443 compare equal.
func Authority(scheme, hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), ""
	}
	if port == "" {
		switch strings.ToLower(scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// ProxyCount is how many proxies the configuration has, every kind, and
// how many of them are tcp proxies (which Proxies leaves out): what a
// user counting the document's proxies finds.
func (rt *Runtime) ProxyCount() (all, tcp int) {
	for i := range rt.Document.Proxies {
		if rt.Document.Proxies[i].Type == config.KindTCP {
			tcp++
		}
	}
	return len(rt.Document.Proxies), tcp
}

// Resolve chooses the proxy for a request's headers: the first
// header-resolved proxy, in configuration order, whose header carries its
// name; else the default; else nil. A name only works through its own
// proxy's header.
func (rt *Runtime) Resolve(h http.Header) *Proxy {
	for _, p := range rt.byHeader {
		if slices.Contains(h[p.ResolveHeader], p.Name) {
			return p
		}
	}
	return rt.Default
}

// Inherit carries over from old what its proxies have counted, to each
// proxy of rt that is unchanged (same name, same revision): a reload, or
// an edit of another proxy, keeps a proxy's attempt counts; a changed
// proxy starts afresh. It runs before rt is put in force.
func (rt *Runtime) Inherit(old *Runtime) {
	if old == nil {
		return
	}
	before := make(map[string]*Proxy, len(old.Proxies))
	for _, o := range old.Proxies {
		before[o.Name] = o
	}
	for _, p := range rt.Proxies {
		if o := before[p.Name]; o != nil && o.Revision == p.Revision {
			p.Attempts = o.Attempts
			p.Counters.Adopt(o.Counters)
		}
	}
}

// Holder holds the Runtime in force. Readers take no lock.
type Holder struct {
	p atomic.Pointer[Runtime]
}

// NewHolder starts with rt in force.
func NewHolder(rt *Runtime) *Holder {
	h := &Holder{}
	h.p.Store(rt)
	return h
}

// Load returns the Runtime in force; a request keeps using the one it
// loaded even if another is swapped in meanwhile.
func (h *Holder) Load() *Runtime { return h.p.Load() }

// Swap puts rt in force.
func (h *Holder) Swap(rt *Runtime) { h.p.Store(rt) }
