package tcp

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Link is one accepted connection and its upstream connection, relayed
// both ways, each direction through its own chain of toxics.
type Link struct {
	proxy            *Proxy
	client, upstream net.Conn
	began            time.Time

	done     chan struct{} // closed by Cut or the end: sleeps and timers stop
	doneOnce sync.Once
	cut      atomic.Bool // a toxic cut it (rather than a side closing)
	reset    atomic.Bool // the cut was a reset

	up, down atomic.Int64 // bytes relayed: client → upstream, upstream → client
	waited   atomic.Int64 // nanoseconds: the longest latency held a chunk, each way, summed
	fired    sync.Map     // toxic names that applied to this link

	// read is the bytes read, by Direction, before the toxics.
	read [2]atomic.Int64

	// plan, when planned, is the connection's own toxics for its life,
	// instead of the proxy's in force.
	plan    *Toxics
	planned bool

	mu       sync.Mutex
	timeouts map[timeoutKey]bool // the timeouts noted, and whether each applies (its toxicity rolled)
}

// timeoutKey is a timeout toxic of one direction: by its name when it
// has one (changed, it is still the same toxic), else by its value.
type timeoutKey struct {
	dir  Direction
	name string
	t    Timeout // "" name only
}

func keyOf(dir Direction, e Entry, t Timeout) timeoutKey {
	if e.Name != "" {
		return timeoutKey{dir: dir, name: e.Name}
	}
	return timeoutKey{dir: dir, t: t}
}

// timeoutIn is the timeout of key k among s, if it is there.
func timeoutIn(s *Toxics, k timeoutKey) (Timeout, bool) {
	for _, e := range s.of(k.dir) {
		if t, ok := e.Toxic.(Timeout); ok && keyOf(k.dir, e, t) == k {
			return t, true
		}
	}
	return Timeout{}, false
}

// noteTimeouts makes each timeout toxic of s the link's from now, as
// Toxiproxy's toxics reach its open connections when added: its toxicity
// rolled once, its time running, and its removal watched, which closes
// the connection. The proxy calls it on every change of its toxics, and
// once when the link starts.
func (l *Link) noteTimeouts(s *Toxics) {
	if l.planned || s == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, dir := range []Direction{Upstream, Downstream} {
		for _, e := range s.of(dir) {
			t, ok := e.Toxic.(Timeout)
			if !ok {
				continue
			}
			k := keyOf(dir, e, t)
			if _, seen := l.timeouts[k]; seen {
				continue
			}
			if l.timeouts == nil {
				l.timeouts = map[timeoutKey]bool{}
			}
			applies := e.Toxicity >= 1 || rand.Float64() < e.Toxicity
			l.timeouts[k] = applies
			if applies {
				go l.watchTimeout(k, t)
			}
		}
	}
}

// appliesTimeout is whether the timeout k was rolled in for the link
// when it was noted; one not noted (it came and went between a change and
// this chain) is rolled now.
func (l *Link) appliesTimeout(k timeoutKey, toxicity float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if applies, seen := l.timeouts[k]; seen {
		return applies
	}
	return toxicity >= 1 || rand.Float64() < toxicity
}

// watchTimeout closes the connection After the timeout k was noted (or
// last changed: Toxiproxy runs a changed toxic anew), or when k is
// removed from the proxy's toxics, whichever comes first.
func (l *Link) watchTimeout(k timeoutKey, t Timeout) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	arm := func(t Timeout) {
		timer.Stop()
		if t.After > 0 {
			timer.Reset(t.After)
		}
	}
	arm(t)
	for {
		changed := l.proxy.changes()
		now, ok := timeoutIn(l.proxy.toxics.Load(), k)
		if !ok {
			l.mu.Lock()
			delete(l.timeouts, k) // added again, it is a new one
			l.mu.Unlock()
			l.Cut(false)
			return
		}
		if now != t {
			t = now
			arm(t)
		}
		select {
		case <-changed:
		case <-timer.C:
			l.Cut(false)
			return
		case <-l.done:
			return
		}
	}
}

// Record is what a link did, once both directions ended.
type Record struct {
	Proxy    string
	Client   string // the client's address
	Up, Down int64  // bytes relayed each way
	Duration time.Duration
	// ReadUp and ReadDown are the bytes read each way, from the client
	// and from the upstream, before the toxics (which may drop some).
	ReadUp, ReadDown int64
	// Toxics are the names of the toxics that applied (their toxicity
	// rolled in), in no particular order.
	Toxics []string
	// Latency is the longest the latency toxic held a chunk, each
	// direction's summed: what it injected, not what it was set to.
	Latency time.Duration
	// Cut says a fault cut the connection; Reset that it was a reset;
	// Early that it was cut or held before anything was relayed (an
	// abort at request, a hang).
	Cut, Reset, Early bool
	// Err is why the link ended early, such as an upstream that cannot be
	// reached; nil for a relay that ran until a side closed.
	Err error
}

// sleep waits d, or until the link ends: false when it ended.
func (l *Link) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

// after runs f after d unless the link ends first.
func (l *Link) after(d time.Duration, f func()) {
	go func() {
		if l.sleep(d) {
			f()
		}
	}()
}

// Cut ends the link now, both connections: reset sends a TCP RST to the
// client (linger 0), else a FIN.
func (l *Link) Cut(reset bool) {
	if l.cut.Swap(true) {
		return
	}
	l.reset.Store(reset)
	l.end()
	if reset {
		if tc, ok := l.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = l.client.Close()
	_ = l.upstream.Close()
}

func (l *Link) end() { l.doneOnce.Do(func() { close(l.done) }) }

// holds reports whether t is still among the link's toxics, for a toxic
// whose time runs on: one removed before its time is up does nothing.
// Toxics are compared as values (every toxic here is comparable).
func (l *Link) holds(t Toxic) bool {
	s := l.plan
	if !l.planned {
		s = l.proxy.toxics.Load()
	}
	if s == nil {
		return false
	}
	for _, e := range append(slices.Clip(s.Up), s.Down...) {
		if e.Toxic == t {
			return true
		}
	}
	return false
}

// stage is one toxic's place in a direction's chain, as built: its
// writer, or nil when its toxicity rolled it out.
type stage struct {
	toxic Toxic
	w     writer
}

// stages are a direction's, by the toxic's name (or its value when it has
// none), for the next chain to keep.
type stages map[any]stage

func stageKey(e Entry) any {
	if e.Name != "" {
		return e.Name
	}
	return e.Toxic
}

// relinker is a stage that keeps its state (a count, a pace, a start)
// when the chain is built again: it is put in front of the new next.
type relinker interface{ relink(next writer) }

// chain builds one direction's writers from the toxics in force, each
// applied with its toxicity (a timeout's as it was rolled when noted);
// the last writes to dst. A toxic that was in the chain before, unchanged,
// keeps its roll and, if it keeps state, its writer, as Toxiproxy's
// toxics keep theirs when another is added or removed.
func (l *Link) chain(dir Direction, toxics []Entry, dst net.Conn, count *atomic.Int64, before stages) (writer, stages) {
	var w writer = &connWriter{c: dst, n: count}
	built := make(stages, len(toxics))
	for i := len(toxics) - 1; i >= 0; i-- {
		e := toxics[i]
		key := stageKey(e)
		if old, ok := before[key]; ok && old.toxic == e.Toxic {
			switch r := old.w.(type) {
			case nil:
				built[key] = old // rolled out, and stays so
				continue
			case relinker:
				r.relink(w)
				w = old.w
				built[key] = old
				continue
			}
		} else if t, ok := e.Toxic.(Timeout); ok && !l.planned {
			if !l.appliesTimeout(keyOf(dir, e, t), e.Toxicity) {
				built[key] = stage{toxic: e.Toxic}
				continue
			}
		} else if e.Toxicity < 1 && rand.Float64() >= e.Toxicity {
			built[key] = stage{toxic: e.Toxic}
			continue
		}
		if !l.planned {
			l.fired.Store(e.Toxic.Name(), true) // a plan names its faults itself
		}
		w = e.Toxic.Wrap(w, l)
		built[key] = stage{toxic: e.Toxic, w: w}
	}
	return w, built
}

// connWriter writes to the peer and counts what went.
type connWriter struct {
	c net.Conn
	n *atomic.Int64
}

func (w *connWriter) Write(b []byte) error {
	n, err := w.c.Write(b)
	w.n.Add(int64(n))
	return err
}

// Release holds nothing.
func (w *connWriter) Release() error { return nil }

// Close passes the end of the source on: a FIN on this direction.
func (w *connWriter) Close() error {
	if cw, ok := w.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return w.c.Close()
}

// relayBuffer is how much one read takes.
const relayBuffer = 32 << 10

// pipe relays src to dst through the direction's toxics until src ends or
// the link is cut. The chain is built again when the proxy's toxics
// change, so a toxic added or removed applies to open connections too.
func (l *Link) pipe(dir Direction, src, dst net.Conn, count *atomic.Int64) error {
	buf := make([]byte, relayBuffer)
	var (
		set  *Toxics
		w    writer
		kept stages
	)
	current := func() writer {
		s := l.plan
		if !l.planned {
			s = l.proxy.toxics.Load()
		}
		if w == nil || s != set {
			if w != nil {
				// What the old chain holds goes first, in order.
				_ = w.Release()
			}
			set = s
			w, kept = l.chain(dir, s.of(dir), dst, count, kept)
		}
		return w
	}
	current()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.read[dir].Add(int64(n))
			if werr := current().Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return current().Close()
			}
			return err
		}
	}
}

// run relays both ways until both directions end, then reports.
func (l *Link) run() {
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = l.pipe(Upstream, l.client, l.upstream, &l.up)
	})
	downErr := l.pipe(Downstream, l.upstream, l.client, &l.down)
	if downErr != nil && !l.cut.Load() {
		// The upstream broke off: the client's side ends too.
		_ = l.client.Close()
		_ = l.upstream.Close()
	}
	wg.Wait()
	l.end()
	_ = l.client.Close()
	_ = l.upstream.Close()
	l.proxy.report(l.record(nil))
}

func (l *Link) record(err error) Record {
	r := Record{Proxy: l.proxy.Name, Client: l.client.RemoteAddr().String(), Up: l.up.Load(), Down: l.down.Load(),
		Duration: time.Since(l.began), Latency: time.Duration(l.waited.Load()), Cut: l.cut.Load(), Reset: l.reset.Load(), Err: err}
	r.ReadUp, r.ReadDown = l.read[Upstream].Load(), l.read[Downstream].Load()
	l.fired.Range(func(k, _ any) bool {
		r.Toxics = append(r.Toxics, k.(string))
		return true
	})
	return r
}
