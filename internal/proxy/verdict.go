package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Whether a client that sent its FIN took the answer written after it. A
// client that half-closes its connection once its request is sent
// (shutdown(SHUT_WR)) still reads; one that closed it is gone. Both send
// the same FIN, and Go's server ends the request's context on it, so the
// FIN says nothing: the answer is written when it is due, and the client's
// kernel tells which it was. A half-closed socket acknowledges the
// answer's bytes and the FIN that follows them; a closed one answers them
// with a reset. Only a client that was answered this way is asked.

// tookAnswer reports whether the client acknowledged everything written on
// c, once c's side is shut too (a close_notify first under TLS). It waits
// for the client's kernel, finDrain at most; when it cannot tell (no
// answer within that time, or no way to ask on this system) it says yes,
// as for any client that is not known to have gone.
func tookAnswer(c net.Conn) bool {
	var raw *net.TCPConn
	for layer := c; layer != nil; {
		switch l := layer.(type) {
		case *tls.Conn:
			_ = l.CloseWrite() // the close_notify; the FIN is the socket's
		case *net.TCPConn:
			raw = l
		}
		u, ok := layer.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		layer = u.NetConn()
	}
	if raw == nil {
		return true
	}
	_ = raw.CloseWrite()
	acked, known := acknowledged(raw, time.Now().Add(finDrain))
	return acked || !known
}

// connKey finds a request's connection in its context (ResumeOn).
type connKey struct{}

// connContext puts the proxy listener's connection, under whatever wraps
// it, in the context of its requests.
func connContext(ctx context.Context, c net.Conn) context.Context {
	for {
		if ec, ok := c.(*envelopingConn); ok {
			return context.WithValue(ctx, connKey{}, ec)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return ctx
		}
		c = u.NetConn()
	}
}

// awaitVerdict leaves recording the request to its connection, which the
// server closes once the answer is written (the client sent its FIN, so no
// request follows): false when it cannot, and the request is recorded now.
func (ex *exchange) awaitVerdict() bool {
	c, _ := ex.req.Context().Value(connKey{}).(*envelopingConn)
	if c == nil {
		return false
	}
	c.pending.Store(ex)
	if c.closed.Load() && c.pending.CompareAndSwap(ex, nil) {
		return false // closed meanwhile
	}
	return true
}

// recordVerdict records a request whose client sent its FIN before its
// answer, as its connection closes after the answer: 499 when a write
// failed or the client did not take it. A stopping Doppel, whose server
// closes connections under its own lock, does not wait to ask.
func (ex *exchange) recordVerdict(c *envelopingConn) {
	if c.failed.Load() || !ex.handler.parked.ending.Load() && !tookAnswer(c) {
		ex.rec.Status = statusClientLeft
	}
	ex.handler.logRequest(ex)
}
