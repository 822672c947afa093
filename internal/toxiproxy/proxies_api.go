package toxiproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
)

// The handlers that make and change proxies. Every listen and upstream a
// client gives is checked before the server's lock is taken (its syntax,
// where it may listen, what its host resolves to); whether the upstream
// is one of Doppel's own listeners is checked with the lock held, against
// the listeners of that moment.

func (s *Server) newProxy(name string, t target) *proxy {
	return &proxy{name: name, listen: t.bind, written: t.written, upstream: t.upstream.text, resolved: t.upstream, report: s.Report, metrics: s.metrics}
}

func (s *Server) policy() listenPolicy { return listenPolicy{host: s.Host, allow: s.AllowListen} }

// target is a proxy's listen and upstream, checked and resolved.
type target struct {
	bind     string // the listen address to bind: an IP address and a port
	written  string // the listen as the client wrote it
	upstream *address
}

// prepare checks listen and upstream and resolves their hosts; ctx
// bounds the lookups of one request together.
func (s *Server) prepare(ctx context.Context, listen, up string) (target, *apiError) {
	if listen == "" {
		listen = ":0" // as net.Listen takes "": every interface, any port
	}
	bind, e := s.policy().bind(ctx, listen)
	if e != nil {
		return target{}, e
	}
	a, e := upstream(ctx, up)
	if e != nil {
		return target{}, e
	}
	return target{bind: bind, written: listen, upstream: a}, nil
}

// checkOwn refuses t's upstream when it reaches one of Doppel's own
// listeners, this server's proxies but self among them, or t's own
// listen. The lock is held.
func (s *Server) checkOwn(t target, self *proxy) *apiError {
	var own []Listener
	if s.Own != nil {
		own = s.Own()
	}
	for _, p := range s.proxies {
		if p.addr != nil && p != self {
			own = append(own, Listener{Name: "Toxiproxy proxy " + strconv.Quote(p.name), Addr: p.addr})
		}
	}
	if ap, err := netip.ParseAddrPort(t.bind); err == nil && ap.Port() != 0 {
		own = append(own, Listener{Name: "listen address", Addr: net.TCPAddrFromAddrPort(ap)})
	}
	if l, ok := ownListener(t.upstream, own); ok {
		return refuseOwn(t.upstream, l)
	}
	return nil
}

func resolveContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), resolveTimeout)
}

// proxyIndex writes every proxy, by name, as Toxiproxy does; the answer
// is encoded proxy by proxy as it is written, never built whole.
func (s *Server) proxyIndex(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	all := make([]proxyJSON, 0, len(s.proxies))
	for _, p := range s.proxies {
		all = append(all, p.json())
	}
	s.mu.Unlock()
	sortProxies(all)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	sw := newStreamWriter(w)
	sw.raw("{")
	for i, p := range all {
		if i > 0 {
			sw.raw(",")
		}
		sw.value(p.Name)
		sw.raw(":")
		sw.value(p)
	}
	sw.raw("}")
}

// proxyInput is a proxy a client sends; enabled is true unless given.
type proxyInput struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  *bool  `json:"enabled"`
}

func decodeProxy(body []byte) (*proxyInput, *apiError) {
	var in proxyInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, badBody(err)
	}
	if e := in.check(""); e != nil {
		return nil, e
	}
	return &in, nil
}

// check is Toxiproxy's, then the name's bounds; at says which proxy of a
// list.
func (in *proxyInput) check(at string) *apiError {
	if in.Name == "" {
		return missing("name" + at)
	}
	if in.Upstream == "" {
		return missing("upstream" + at)
	}
	if e := checkName("name"+at, in.Name); e != nil {
		return e
	}
	return nil
}

func (in *proxyInput) enabled() bool { return in.Enabled == nil || *in.Enabled }

func (s *Server) proxyCreate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	in, e := decodeProxy(body)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := resolveContext(r)
	t, e := s.prepare(ctx, in.Listen, in.Upstream)
	cancel()
	if e != nil {
		writeError(w, e)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.proxies[in.Name]; ok {
		writeError(w, errProxyExists)
		return
	}
	if len(s.proxies) >= MaxProxies {
		writeError(w, tooMany("proxies", MaxProxies))
		return
	}
	if e := s.checkOwn(t, nil); e != nil {
		writeError(w, e)
		return
	}
	p := s.newProxy(in.Name, t)
	if in.enabled() {
		if err := p.start(); err != nil {
			writeError(w, serverError(err))
			return
		}
	}
	if s.proxies == nil {
		s.proxies = map[string]*proxy{}
	}
	s.proxies[p.name] = p
	writeJSON(w, http.StatusCreated, p.json())
}

// populate makes or replaces each proxy of a list, as Toxiproxy 2.12.0
// does: one with the same listen and upstream is left as it is, with its
// toxics and connections, and is in the answer; another is stopped and
// replaced (its toxics go). Names and upstreams are checked for the
// whole list first, as Toxiproxy checks them; then each proxy in turn, and
// the first whose listen or upstream is refused, that cannot listen, or
// whose upstream is one of Doppel's listeners, ends it: those before it
// are made, and the answer names them. Every error is in
// populate's own answer, as Toxiproxy writes it, with no proxies when
// none were made.
func (s *Server) populate(w http.ResponseWriter, r *http.Request) {
	refuse := func(e *apiError) { writePopulated(w, e.Status, e, nil) }
	body, e := readBody(w, r)
	if e != nil {
		refuse(e)
		return
	}
	var in []proxyInput
	if err := json.Unmarshal(body, &in); err != nil {
		refuse(badBody(err))
		return
	}
	for i := range in {
		if e := in[i].check(fmt.Sprintf(" at proxy %d", i+1)); e != nil {
			refuse(e)
			return
		}
	}
	if len(in) > MaxProxies {
		refuse(tooMany("proxies", MaxProxies))
		return
	}
	// Each listen and upstream is checked and resolved before the lock is
	// taken; the first that fails ends the list where it stands, those
	// before it made, as in Toxiproxy.
	targets := make([]target, len(in))
	ctx, cancel := resolveContext(r)
	bad := len(in)
	for i, p := range in {
		if targets[i], e = s.prepare(ctx, p.Listen, p.Upstream); e != nil {
			bad = i
			break
		}
	}
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proxies == nil {
		s.proxies = map[string]*proxy{}
	}
	names := map[string]bool{}
	for name := range s.proxies {
		names[name] = true
	}
	for _, p := range in {
		names[p.Name] = true
	}
	if len(names) > MaxProxies {
		refuse(tooMany("proxies", MaxProxies))
		return
	}
	var failed *apiError
	made := make([]proxyJSON, 0, len(in))
	for i, in := range in {
		if i == bad {
			failed = e
			break
		}
		old := s.proxies[in.Name]
		// As Toxiproxy compares them: the listen resolved (localhost:N
		// is the 127.0.0.1:N a proxy reports), the upstream as written.
		if old != nil && old.listen == targets[i].bind && old.upstream == in.Upstream {
			made = append(made, old.json())
			continue
		}
		if failed = s.checkOwn(targets[i], old); failed != nil {
			break
		}
		if old != nil {
			old.stop()
		}
		p := s.newProxy(in.Name, targets[i])
		if in.enabled() {
			if err := p.start(); err != nil {
				failed = serverError(err)
				break
			}
		}
		s.proxies[p.name] = p
		made = append(made, p.json())
	}
	status := http.StatusCreated
	if failed != nil {
		status = failed.Status
	}
	writePopulated(w, status, failed, made)
}

// writePopulated is populate's answer, {"proxies": [...]} with
// Toxiproxy's error before them when one ended the list, and, as
// Toxiproxy writes it, "proxies": null when there are none; the proxies
// are encoded one by one as they are written.
func writePopulated(w http.ResponseWriter, status int, failed *apiError, made []proxyJSON) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	sw := newStreamWriter(w)
	sw.raw("{")
	if failed != nil {
		sw.raw(`"error":`)
		sw.value(failed.Message)
		sw.raw(`,"status":` + strconv.Itoa(failed.Status) + ",")
	}
	if len(made) == 0 {
		sw.raw(`"proxies":null}`)
		return
	}
	sw.raw(`"proxies":[`)
	for i, p := range made {
		if i > 0 {
			sw.raw(",")
		}
		sw.value(p)
	}
	sw.raw("]}")
}

// proxyUpdate changes enabled, listen and upstream, each the proxy's own
// unless given: a new address stops the proxy, and it starts again when
// it is to be enabled.
func (s *Server) proxyUpdate(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	var in struct {
		Listen   *string `json:"listen"`
		Upstream *string `json:"upstream"`
		Enabled  *bool   `json:"enabled"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, badBody(err))
		return
	}
	// What is given is checked before the lock; what is not is the
	// proxy's, read under it, as it was checked when it was given.
	var bind, written string
	var up *address
	ctx, cancel := resolveContext(r)
	if in.Listen != nil {
		written = *in.Listen
		if written == "" {
			written = ":0"
		}
		bind, e = s.policy().bind(ctx, written)
	}
	if e == nil && in.Upstream != nil {
		up, e = upstream(ctx, *in.Upstream)
	}
	cancel()
	if e != nil {
		writeError(w, e)
		return
	}
	p, ok := s.lockedProxy(w, r)
	if !ok {
		return
	}
	defer s.mu.Unlock()
	t := target{bind: p.listen, upstream: p.resolved}
	if in.Listen != nil {
		t.bind = bind
	}
	if in.Upstream != nil {
		t.upstream = up
	}
	enabled := p.enabled
	if in.Enabled != nil {
		enabled = *in.Enabled
	}
	if t.bind != p.listen || t.upstream.text != p.upstream {
		if e := s.checkOwn(t, p); e != nil {
			writeError(w, e)
			return
		}
		p.stop()
		p.listen, p.upstream, p.resolved = t.bind, t.upstream.text, t.upstream
		if in.Listen != nil {
			p.written = written
		}
	}
	if enabled != p.enabled {
		if !enabled {
			p.stop()
		} else if err := p.start(); err != nil {
			writeError(w, serverError(err))
			return
		}
	}
	writeJSON(w, http.StatusOK, p.json())
}
