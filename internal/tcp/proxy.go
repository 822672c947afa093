// Package tcp relays TCP connections with faults (SPEC §17.8), in the
// shape of Toxiproxy: a Proxy is a listener and its upstream (lifecycle);
// a Link is one accepted connection relayed both ways (the bytes), each
// direction through a chain of toxics, each toxic one small value
// (toxics.go). What a Doppel's TCP proxies and the Toxiproxy-compatible
// API build are both these.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is which way bytes go.
type Direction uint8

const (
	// Upstream is from the client to the upstream.
	Upstream Direction = iota
	// Downstream is from the upstream to the client.
	Downstream
)

func (d Direction) String() string {
	if d == Downstream {
		return "downstream"
	}
	return "upstream"
}

// Entry is a toxic in a direction's chain, applied to a share of the
// connections (Toxicity, 0 to 1).
type Entry struct {
	Toxic    Toxic
	Toxicity float64
	// Name is the toxic's own name, when it has one (a Toxiproxy client's
	// toxic): what makes it the same toxic when its attributes change.
	Name string
}

// Toxics are both directions' chains, in order: replaced whole, never
// changed, so a link reads them without a lock.
type Toxics struct {
	Up, Down []Entry
}

func (t *Toxics) of(d Direction) []Entry {
	if t == nil {
		return nil
	}
	if d == Downstream {
		return t.Down
	}
	return t.Up
}

// Plan is what one connection gets.
type Plan struct {
	// Cut cuts the connection at once, before anything is relayed or the
	// upstream dialled: a reset, or a FIN with Close.
	Cut, Close bool
	// Hang holds the connection this long, relaying nothing and dialling
	// no upstream, then closes it (a FIN).
	Hang time.Duration
	// Toxics are the connection's for its whole life.
	Toxics *Toxics
	// Faults name what fired, for the record.
	Faults []string
}

// DialTimeout bounds reaching the upstream for one connection.
const DialTimeout = 10 * time.Second

// Proxy is a listener relaying each connection to Upstream.
type Proxy struct {
	Name     string
	Upstream string // HOST:PORT
	// Report receives each link's record when it ends; nil for none.
	Report func(Record)
	// Decide, when set, plans each accepted connection (a Doppel proxy's
	// faults, rolled per connection); without it every connection gets
	// the proxy's toxics in force (SetToxics), as Toxiproxy's do.
	Decide func(client net.Addr) Plan
	// CloseUnreachable closes the client's connection (a FIN) when the
	// upstream cannot be reached, as Toxiproxy does; else it is reset, as
	// a server that is down would refuse it.
	CloseUnreachable bool

	toxics  atomicToxics
	changed atomic.Pointer[chan struct{}] // closed when the toxics change

	mu    sync.Mutex
	ln    net.Listener
	links map[*Link]struct{}
	wg    sync.WaitGroup
}

// SetToxics puts t in force, for open connections too.
func (p *Proxy) SetToxics(t *Toxics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toxics.Store(t)
	c := make(chan struct{})
	if old := p.changed.Swap(&c); old != nil {
		close(*old)
	}
	for l := range p.links {
		l.noteTimeouts(t)
	}
}

// changes is closed at the next SetToxics.
func (p *Proxy) changes() <-chan struct{} {
	for {
		if c := p.changed.Load(); c != nil {
			return *c
		}
		c := make(chan struct{})
		if p.changed.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// Listen binds addr and relays what it accepts until Close. It returns
// the bound address.
func (p *Proxy) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("TCP proxy %s cannot listen on %s: %w", p.Name, addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	if p.links == nil {
		p.links = map[*Link]struct{}{}
	}
	p.mu.Unlock()
	p.wg.Go(func() { p.accept(ln) })
	return ln.Addr(), nil
}

func (p *Proxy) accept(ln net.Listener) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: wait and accept again, as net/http
			// does, rather than stop listening for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve dials the upstream for c and relays; an upstream that cannot be
// reached resets the client's connection (or closes it, CloseUnreachable),
// and the record says why.
func (p *Proxy) serve(c net.Conn) {
	began := time.Now()
	var plan *Plan
	if p.Decide != nil {
		pl := p.Decide(c.RemoteAddr())
		plan = &pl
		if pl.Cut || pl.Hang > 0 {
			p.endEarly(c, began, pl)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.Upstream)
	cancel()
	if err != nil {
		if p.CloseUnreachable {
			_ = c.Close()
		} else {
			resetConn(c)
		}
		r := Record{Proxy: p.Name, Client: c.RemoteAddr().String(), Duration: time.Since(began), Reset: !p.CloseUnreachable,
			Err: fmt.Errorf("the upstream %s cannot be reached: %w", p.Upstream, err)}
		if plan != nil {
			r.Toxics = plan.Faults
		}
		p.report(r)
		return
	}
	l := &Link{proxy: p, client: c, upstream: up, began: began, done: make(chan struct{})}
	if plan != nil {
		l.plan = plan.Toxics
		l.planned = true
		for _, f := range plan.Faults {
			l.fired.Store(f, true)
		}
	}
	if !p.track(l) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	defer p.untrack(l)
	if !l.planned {
		l.noteTimeouts(p.toxics.Load())
	}
	l.run()
}

// endEarly is a connection a plan cuts or holds before anything is
// relayed.
func (p *Proxy) endEarly(c net.Conn, began time.Time, pl Plan) {
	r := Record{Proxy: p.Name, Client: c.RemoteAddr().String(), Toxics: pl.Faults, Cut: true, Reset: pl.Cut && !pl.Close, Early: true}
	if pl.Cut {
		if pl.Close {
			_ = c.Close()
		} else {
			resetConn(c)
		}
		r.Duration = time.Since(began)
		p.report(r)
		return
	}
	// A hang: what the client sends is read and dropped, so that it
	// never fills the window, until the time is up or it leaves.
	_ = c.SetReadDeadline(began.Add(pl.Hang))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	_ = c.Close()
	r.Duration = time.Since(began)
	p.report(r)
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) track(l *Link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false // closing
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l *Link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

func (p *Proxy) report(r Record) {
	if p.Report != nil {
		p.Report(r)
	}
}

// Close stops listening and ends every open connection, then waits for
// their records.
func (p *Proxy) Close() error {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	links := make([]*Link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	for _, l := range links {
		l.Cut(false)
	}
	p.wg.Wait()
	return err
}

// atomicToxics holds a proxy's toxics.
type atomicToxics struct{ p atomic.Pointer[Toxics] }

func (a *atomicToxics) Load() *Toxics   { return a.p.Load() }
func (a *atomicToxics) Store(t *Toxics) { a.p.Store(t) }
