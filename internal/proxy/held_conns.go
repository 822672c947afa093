package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// What a stopping Doppel ends: the connections taken from the server
// (hold.go, cut.go's hangs).

// heldConns are connections taken from the server that Doppel still
// answers on (hangs, parked answers), so that a stopping Doppel can end
// them; their lock is taken only by such requests. stop, when made, is
// closed by end: it ends the waits of latencies whose client sent its FIN.
type heldConns struct {
	mu      sync.Mutex
	conns   map[net.Conn]func() // what ends a wait that is not a read
	wg      sync.WaitGroup
	ending  atomic.Bool
	stop    chan struct{}
	stopped bool
}

// waitUntil waits until t, or until end is called.
func (hs *heldConns) waitUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-hs.stop:
	}
}

// add holds c, unless they are ending; end calls stop, when given,
// rather than its own function.
func (hs *heldConns) add(c net.Conn, stop func()) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.ending.Load() {
		return false
	}
	if hs.conns == nil {
		hs.conns = map[net.Conn]func(){}
	}
	hs.conns[c] = stop
	hs.wg.Add(1)
	return true
}

func (hs *heldConns) done(c net.Conn) {
	hs.mu.Lock()
	delete(hs.conns, c)
	hs.mu.Unlock()
	hs.wg.Done()
}

// end refuses new ones and applies f (or its own stop) to each held now.
func (hs *heldConns) end(f func(net.Conn)) {
	hs.mu.Lock()
	hs.ending.Store(true)
	if hs.stop != nil && !hs.stopped {
		close(hs.stop)
		hs.stopped = true
	}
	for c, stop := range hs.conns {
		if stop != nil {
			stop()
		} else {
			f(c)
		}
	}
	hs.mu.Unlock()
}
