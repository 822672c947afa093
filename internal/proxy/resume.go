package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// A parked answer's connection goes back to the server (hold.go has the
// whole idea): through a Serve of its own, with what the client sent
// meanwhile read first.

// handedBack are connections given back to the server after a parked
// answer that have not begun another request. The server counts them as
// new, and a shutting-down server waits five seconds for a new
// connection's first request; these are idle keep-alive connections, so
// they are closed when it shuts down, as it closes its idle ones. Their
// lock is taken only by parked answers and their connections' first
// state change.
type handedBack struct {
	mu    sync.Mutex
	conns map[*resumedConn]struct{}
}

func (hb *handedBack) add(c *resumedConn) {
	hb.mu.Lock()
	if hb.conns == nil {
		hb.conns = map[*resumedConn]struct{}{}
	}
	hb.conns[c] = struct{}{}
	hb.mu.Unlock()
}

func (hb *handedBack) remove(c *resumedConn) {
	hb.mu.Lock()
	delete(hb.conns, c)
	hb.mu.Unlock()
}

func (hb *handedBack) closeAll() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	for c := range hb.conns {
		_ = c.Close()
		delete(hb.conns, c)
	}
}

// oneConn is a listener that yields one connection, then says it is done.
type oneConn struct {
	c    net.Conn
	addr net.Addr
}

// errServed ends the Serve a oneConn was given to.
var errServed = errors.New("the connection is served")

func (l *oneConn) Accept() (net.Conn, error) {
	c := l.c
	if c == nil {
		return nil, errServed
	}
	l.c = nil
	return c, nil
}

// Close leaves the connection to the server once accepted.
func (l *oneConn) Close() error {
	if l.c != nil {
		_ = l.c.Close()
		l.c = nil
	}
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.addr }

// resumedConn is a connection handed back after a parked answer, with
// the bytes the client sent while it waited: the server reads those
// first.
type resumedConn struct {
	net.Conn
	pending []byte
}

func (c *resumedConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn is the connection under the wrapper.
func (c *resumedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite lets an upgraded connection half-close through the wrapper.
func (c *resumedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// unwrapResumed undoes an earlier resumedConn, so that a connection parked
// again and again does not grow a chain of them: what it had not yet
// handed out follows what the server had buffered.
func unwrapResumed(c net.Conn, pending []byte) (net.Conn, []byte) {
	if rc, ok := c.(*resumedConn); ok {
		return rc.Conn, append(pending, rc.pending...)
	}
	return c, pending
}

// ResumeOn lets this handler park delayed answers on srv's HTTP/1.1
// connections and hand them back to it once answered, and know the
// connection of each request, to tell whether a client that sent its FIN
// took its answer; without it, a delayed answer waits in the handler and
// such a client is taken to have read it.
func (h *Handler) ResumeOn(srv *http.Server) {
	h.server = srv
	prevCtx := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		return connContext(ctx, c)
	}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if rc, ok := c.(*resumedConn); ok && st != http.StateNew {
			h.handedBack.remove(rc)
		}
		if st == http.StateIdle {
			// The answer's write deadline (boundWrites) must not fall on
			// what the server writes before the next request's handler:
			// its 400 for a malformed request, say.
			_ = c.SetWriteDeadline(time.Time{})
		}
		if prev != nil {
			prev(c, st)
		}
	}
	srv.RegisterOnShutdown(h.handedBack.closeAll)
}
