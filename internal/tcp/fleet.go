package tcp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
)

// Fleet runs a document's tcp proxies: each listens on its own address,
// and follows the document as it changes.
type Fleet struct {
	// Roller rolls the faults; fault.Random{} when nil.
	Roller fault.Roller
	// Report receives every connection's record.
	Report func(Record)

	mu      sync.Mutex
	running map[string]*running
}

type running struct {
	proxy    *Proxy
	listen   string
	upstream string
	rev      config.Revision // the proxy's, whose faults the planner has
	planner  atomic.Pointer[Planner]
	doc      *config.Proxy
	addr     net.Addr
}

// Apply makes the running proxies doc's tcp proxies: a new one listens, a
// removed one stops (its connections end), a changed one plans its next
// connections by its new faults, and listens anew when its address
// changed. A proxy that cannot listen is reported and the others are in
// force all the same.
func (f *Fleet) Apply(doc *config.Document) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		f.running = map[string]*running{}
	}
	want := map[string]*config.Proxy{}
	for i := range doc.Proxies {
		if p := &doc.Proxies[i]; p.Type == config.KindTCP {
			want[string(p.Name)] = p
		}
	}
	for name, r := range f.running {
		if p, ok := want[name]; !ok || p.Listen.String() != r.listen || p.Upstream.String() != r.upstream {
			_ = r.proxy.Close()
			delete(f.running, name)
		}
	}
	var errs []error
	for _, p := range doc.Proxies {
		if p.Type != config.KindTCP {
			continue
		}
		name := string(p.Name)
		rev, _ := config.ProxyRevision(&p)
		if r, ok := f.running[name]; ok {
			if r.rev != rev {
				// Its counts restart with its revision, as an http proxy's.
				r.planner.Store(NewPlanner(&p, f.Roller, fault.NewCounters()))
				r.rev = rev
			}
			r.doc = want[name]
			continue
		}
		planner := NewPlanner(&p, f.Roller, fault.NewCounters())
		r := &running{listen: p.Listen.String(), upstream: p.Upstream.String(), doc: want[name], rev: rev}
		r.planner.Store(planner)
		r.proxy = &Proxy{Name: name, Upstream: r.upstream, Report: f.Report,
			Decide: func(c net.Addr) Plan { return r.planner.Load().Plan(c) }}
		addr, err := r.proxy.Listen(r.listen)
		if err != nil {
			errs = append(errs, fmt.Errorf("proxies %s: %w", name, err))
			continue
		}
		r.addr = addr
		f.running[name] = r
	}
	return errors.Join(errs...)
}

// Addr is where the running tcp proxy of that name listens; nil when none
// does.
func (f *Fleet) Addr(name string) net.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.running[name]; ok {
		return r.addr
	}
	return nil
}

// Addrs are where the running tcp proxies listen, by name.
func (f *Fleet) Addrs() map[string]net.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]net.Addr, len(f.running))
	for name, r := range f.running {
		out[name] = r.addr
	}
	return out
}

// CanListen reports why addr cannot be listened on, or nil: an address a
// running proxy holds can (it is Doppel's own); another is tried.
func (f *Fleet) CanListen(addr string) error {
	f.mu.Lock()
	for _, r := range f.running {
		if r.listen == addr {
			f.mu.Unlock()
			return nil
		}
	}
	f.mu.Unlock()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// Counters are the when counts of the running tcp proxy of that name; nil
// when none runs.
func (f *Fleet) Counters(name string) *fault.Counters {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.running[name]; ok {
		return r.planner.Load().counters
	}
	return nil
}

// Close stops every proxy and ends its connections.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, r := range f.running {
		_ = r.proxy.Close()
		delete(f.running, name)
	}
}
