package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/fault"
)

// The connection faults' side of the exchange (SPEC §17.2): cutting the
// client's connection, and holding it unanswered.

// statusCut is logged for a request whose connection Doppel cut, or
// closed after a hang, before any answer reached the client (nginx's
// "closed without a response").
const statusCut = 444

// finDrain bounds how long a close waits for the client to read the FIN
// and close its side; unread bytes of the request left in the kernel
// would make the close a reset.
const (
	finDrain    = time.Second
	maxFinDrain = 1 << 20
)

// connWriter is the connection's writer once a fault wraps the answer's:
// it tells whether the status line reached it, which no wrapper can.
type connWriter struct {
	http.ResponseWriter
	answered bool
	ex       *exchange // whose writes it bounds
}

func (c *connWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		c.answered = true
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *connWriter) Write(b []byte) (int, error) {
	c.answered = true
	return boundedWrite(c.ex, c.ResponseWriter, b)
}

func (c *connWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Wrap puts a fault's writer in front of the answer's.
func (ex *exchange) Wrap(wrap func(http.ResponseWriter) http.ResponseWriter) {
	if ex.base == nil {
		ex.base = &connWriter{ResponseWriter: ex.w, ex: ex}
		ex.w = ex.base
	}
	ex.w = wrap(ex.w)
}

// answered reports whether the status line went to the connection.
func (ex *exchange) answered() bool {
	if ex.base != nil {
		return ex.base.answered
	}
	return ex.answer != answerNone
}

// endWriters tells the faults' writers that the answer is complete.
func (ex *exchange) endWriters() {
	for w := ex.w; w != nil && w != ex.conn; {
		if e, ok := w.(fault.Ender); ok {
			e.End()
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// Request is the request as the client sent it.
func (ex *exchange) Request() *http.Request { return ex.req }

// Context is the request's.
func (ex *exchange) Context() context.Context { return ex.req.Context() }

// Cut cuts the client's connection now: on HTTP/1 what the answer wrote
// so far is sent, then the connection closes with a RST (reset: linger 0)
// or a FIN; on HTTP/2 the stream is reset and the connection kept.
func (ex *exchange) Cut(reset bool) {
	if ex.answer == answerCut {
		return
	}
	answered := ex.answered()
	ex.to(answerCut) // nothing more is answered
	if !answered {
		ex.rec.Status = statusCut
		ex.rec.Duration = time.Since(ex.start)
	}
	if c := ex.hijack(answered); c != nil {
		closeConn(c, reset)
		return
	}
	// HTTP/2, or a connection that cannot be taken: what was written
	// goes out, then the server resets the stream (RST_STREAM,
	// INTERNAL_ERROR) as the handler aborts.
	if answered {
		_ = http.NewResponseController(ex.conn).Flush()
	}
	panic(http.ErrAbortHandler)
}

// hijack takes an HTTP/1 connection from the server, after sending what
// the answer wrote (flush is whether there is any): nil when it cannot.
func (ex *exchange) hijack(flush bool) net.Conn {
	if ex.req.ProtoMajor != 1 {
		return nil
	}
	h, ok := ex.conn.(http.Hijacker)
	if !ok {
		return nil
	}
	if flush {
		ex.boundWrites()
		_ = http.NewResponseController(ex.conn).Flush()
	}
	c, _, err := h.Hijack()
	if err != nil {
		return nil
	}
	return c
}

// closeConn closes a taken connection: reset sends a RST at once; else a
// FIN, then what the client still sends is read (for finDrain at most)
// so that the close does not turn into a reset.
func closeConn(c net.Conn, reset bool) {
	raw := c
	for {
		u, ok := raw.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		raw = u.NetConn()
	}
	if reset {
		if l, ok := raw.(interface{ SetLinger(int) error }); ok {
			_ = l.SetLinger(0)
		}
		_ = c.Close()
		return
	}
	if cw, ok := raw.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = c.SetReadDeadline(time.Now().Add(finDrain))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, maxFinDrain))
	}
	_ = c.Close()
}

// Hang leaves the request unanswered for d, then closes with a FIN. On
// HTTP/1 the connection is taken and a goroutine of its own waits on it
// (a read that ends when the client leaves or d has passed), so the
// server's buffers go at once; the request is recorded when the wait
// ends. On HTTP/2 the handler waits, then resets the stream.
func (ex *exchange) Hang(d time.Duration) {
	ex.to(answerStarted)
	start := time.Now()
	if c := ex.hijack(false); c != nil {
		ex.to(answerDetached)
		// Nothing of the server's is used again: what the record needs
		// is in it.
		ex.w, ex.conn, ex.base = nil, nil, nil
		if !ex.handler.hangs.add(c, nil) {
			_ = c.Close() // shutting down
			ex.rec.Status = statusCut
			ex.rec.Duration = time.Since(ex.start)
			ex.handler.logRequest(ex)
			return
		}
		go ex.hangOn(c, start.Add(d))
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		ex.rec.Status = statusCut
		ex.rec.Duration = time.Since(ex.start)
		ex.to(answerCut)
		panic(http.ErrAbortHandler)
	case <-ex.req.Context().Done():
		ex.clientLeft()
	}
}

// hangOn waits on a taken connection until the client leaves or the hang
// is over, closes it, and records the request.
func (ex *exchange) hangOn(c net.Conn, until time.Time) {
	hangs := &ex.handler.hangs
	defer hangs.done(c)
	_ = c.SetReadDeadline(until)
	var buf [512]byte
	var err error
	for err == nil {
		_, err = c.Read(buf[:])
	}
	switch ne, ok := err.(net.Error); {
	case ok && ne.Timeout():
		ex.rec.Status = statusCut
		ex.rec.Duration = time.Since(ex.start)
		closeConn(c, false)
	case hangs.ending.Load():
		// Doppel is stopping: EndHangs closed it.
		ex.rec.Status = statusCut
		ex.rec.Duration = time.Since(ex.start)
	default:
		ex.clientLeft()
		_ = c.Close()
	}
	ex.handler.logRequest(ex)
}

// EndHangs closes every connection a hang holds, waits until each has
// been recorded, and refuses new hangs: for a stopping Doppel, after its
// server has shut down (which does not know the connections it handed
// over).
func (h *Handler) EndHangs() {
	hs := &h.hangs
	hs.end(func(c net.Conn) { _ = c.Close() })
	hs.wg.Wait()
}
