package proxy

import (
	"bytes"
	"net"
	"sync/atomic"

	"github.com/doppelproxy/doppel/internal/apierr"
)

// Listener wraps the proxy listener so that the one answer Go's HTTP
// server makes to a client's mistake before any handler runs, and that the
// handler could make itself, is Doppel's: a request whose
// Transfer-Encoding names a coding nobody can decode gets 400
// INVALID_REQUEST_BODY in the envelope, like a malformed chunk, instead of
// the server's plain-text 501. (A 431 for oversized headers stays the
// server's, as documented.)
func Listener(ln net.Listener) net.Listener { return envelopingListener{ln} }

type envelopingListener struct{ net.Listener }

func (l envelopingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &envelopingConn{Conn: c}, nil
}

// unsupportedTE is, byte for byte, what net/http writes to the connection
// for a transfer coding it does not know, in one write; an answer that
// went through a handler always carries a Date, so it never equals it.
var unsupportedTE = []byte("HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding")

var unsupportedTEAnswer = apierr.Raw(apierr.InvalidRequestBody,
	"the request's Transfer-Encoding names a coding that cannot be read; only chunked is")

// envelopingConn is every connection of the proxy listener. It also keeps
// what the server does not tell a handler: whether a write failed, and the
// request (pending) whose client sent its FIN before its answer, which is
// recorded when the server closes the connection after writing it.
type envelopingConn struct {
	net.Conn
	failed  atomic.Bool
	closed  atomic.Bool
	pending atomic.Pointer[exchange]
}

func (c *envelopingConn) Write(b []byte) (int, error) {
	if len(b) == len(unsupportedTE) && bytes.Equal(b, unsupportedTE) {
		if _, err := c.Conn.Write(unsupportedTEAnswer); err != nil {
			c.failed.Store(true)
			return 0, err
		}
		return len(b), nil
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.failed.Store(true)
	}
	return n, err
}

// Close records the pending request first: the server closes a connection
// whose client sent its FIN once the answer is written.
func (c *envelopingConn) Close() error {
	if !c.closed.Swap(true) {
		if ex := c.pending.Swap(nil); ex != nil {
			ex.recordVerdict(c)
		}
	}
	return c.Conn.Close()
}

// NetConn is the connection under the wrapper: a cut sets its linger.
func (c *envelopingConn) NetConn() net.Conn { return c.Conn }

// CloseWrite lets an upgraded connection half-close through the wrapper.
func (c *envelopingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
