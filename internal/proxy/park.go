package proxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Parking a delayed answer. An injected latency used to hold the handler
// for the whole wait, and with it everything net/http keeps for a request
// being served: the connection's read and write buffers, the answer's
// chunking buffer, the request's contexts and a second goroutine reading
// in the background; about 60 KiB of resident memory per waiting request
// under load. When the answer is complete and small before its time has
// come (a mock, or an upstream's body of known size read ahead by
// holdWhileDelayed), and the request is HTTP/1.1 without a body, the
// answer is held instead: the handler returns, the connection is taken
// from the server, and the answer waits, on a timer for a plain TCP
// connection (parkedWait) and in a goroutine reading it for TLS
// (waitParked); when the latency target is reached it is written and the
// connection handed back to the server, which serves the client's next
// request as on a connection just accepted. The client sees the same
// bytes on the same connection at the same instant; Doppel keeps the held
// answer and a timer (or a parked goroutine).
//
// The connection goes back through a Serve of its own (oneConn) rather
// than through the proxy listener's: a single accepting goroutine, waiting
// its turn among thousands of runnable ones, held resumed connections back
// for up to a second under load while their clients' next requests
// waited.

// parkedWrite bounds writing a parked answer to a client that does not
// read it, as writeStall does an answer written in the handler.
const parkedWrite = writeStall

// maxParkedPending bounds what a client may send ahead (pipelined
// requests) while its answer waits: more, and the connection closes
// after the answer.
const maxParkedPending = 64 << 10

// mayHold reports whether an answer starting with code may be held
// rather than waited for in the handler.
func (ex *exchange) mayHold(code int) bool {
	h := ex.handler
	return h.server != nil && !h.parked.ending.Load() &&
		ex.req.ProtoMajor == 1 && ex.req.ProtoMinor == 1 &&
		ex.base == nil && !sendsBody(ex.req) && code != http.StatusSwitchingProtocols
}

// hold keeps an answer's body while it is held, up to maxHeldBody; more
// releases it.
func (ex *exchange) hold(b []byte) (int, error) {
	if !bodyAllowedForStatus(ex.rec.Status) {
		return 0, http.ErrBodyNotAllowed
	}
	if len(ex.held)+len(b) <= maxHeldBody {
		ex.held = append(ex.held, b...)
		return len(b), nil
	}
	ex.release()
	return ex.w.Write(b)
}

// release gives up holding: the handler waits out the latency and the
// answer goes through the server as any other.
func (ex *exchange) release() {
	ex.holding = false
	if !ex.waitLatency() {
		ex.clientLeft()
		ex.held = nil
		return
	}
	ex.sendHeader(ex.rec.Status)
	if len(ex.held) > 0 {
		_, _ = ex.w.Write(ex.held)
	}
	ex.held = nil
}

// park takes the connection of a held answer, once the handler is done
// with it, and leaves the wait to a goroutine of its own, which records
// the request when the answer is written. False when the answer cannot be
// parked: then it has been released.
func (ex *exchange) park() bool {
	hdr := ex.conn.Header()
	if !parkable(hdr) {
		ex.release()
		return false
	}
	hj, ok := ex.conn.(http.Hijacker)
	if !ok {
		ex.release()
		return false
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		ex.release()
		return false
	}
	// What the client sent after this request (pipelined) is the next
	// request's: it goes back with the connection.
	var pending []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		pending = append(pending, b...)
	}
	c, pending = unwrapResumed(c, pending)
	ex.holding, ex.detached = false, true
	ex.header = hdr
	// Nothing of the server's is used again.
	ex.w, ex.conn, ex.base = nil, nil, nil
	ps := &ex.handler.parked
	if rc := plainSocket(c); rc != nil {
		pw := &parkedWait{ex: ex, c: c, rc: rc, pending: pending, began: time.Now()}
		if !ps.add(c, pw.now) {
			go pw.answer(false) // stopping: answer at once
			return true
		}
		time.AfterFunc(time.Until(ex.start.Add(ex.latency)), pw.due)
		return true
	}
	_ = c.SetReadDeadline(ex.start.Add(ex.latency))
	if !ps.add(c, nil) {
		_ = c.SetReadDeadline(time.Now()) // stopping: answer at once
		go ex.waitParked(c, pending, false)
		return true
	}
	go ex.waitParked(c, pending, true)
	return true
}

// parkedWait is a parked answer on a plain TCP connection: it waits on a
// runtime timer, which the runtime keeps in a heap per processor, with no
// goroutine and no read of its own until it is due. A goroutine's stack
// (8 KiB under load) was most of what a waiting request cost, and the
// read that timed out, with its deadline and its error, a tenth of the
// CPU. What the client sends meanwhile stays in the kernel's buffer (its
// receive window bounds it), and whether it sent its FIN is asked once,
// when the answer is due.
type parkedWait struct {
	ex      *exchange
	c       net.Conn
	rc      syscall.RawConn
	pending []byte
	began   time.Time
	fired   atomic.Bool
}

// due is the timer's: the answer's time has come.
func (pw *parkedWait) due() {
	if pw.fired.CompareAndSwap(false, true) {
		pw.answer(true)
	}
}

// now answers at once: Doppel is stopping.
func (pw *parkedWait) now() {
	if pw.fired.CompareAndSwap(false, true) {
		go pw.answer(true)
	}
}

func (pw *parkedWait) answer(registered bool) {
	ex := pw.ex
	if registered {
		defer ex.handler.parked.done(pw.c)
	}
	ex.rec.LatencyWaited = time.Since(pw.began)
	ex.answerParked(pw.c, pw.pending, sentFIN(pw.rc), false)
}

// parkable reports whether the header lets the answer be written whole
// here: no framing or trailers of the handler's own.
func parkable(h http.Header) bool {
	if _, ok := h["Transfer-Encoding"]; ok {
		return false
	}
	if _, ok := h["Trailer"]; ok {
		return false
	}
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return false
		}
	}
	return true
}

// waitParked waits on a parked connection that is not plain TCP (TLS,
// whose records only a read can take) until the latency target (or until
// Doppel stops), reading what the client sends meanwhile, writes the
// answer, records the request, and hands the connection back to the
// server unless it closes. A client that sent its FIN meanwhile may only
// have half-closed its side: it is answered when the answer is due as
// well, the connection closes after the answer, and the record says 499
// if the client had gone (verdict.go).
func (ex *exchange) waitParked(c net.Conn, pending []byte, registered bool) {
	h := ex.handler
	if registered {
		defer h.parked.done(c)
	}
	began := time.Now()
	var buf [512]byte
	fin, overflow := false, false
	for {
		n, err := c.Read(buf[:])
		if n > 0 {
			if len(pending)+n > maxParkedPending {
				overflow = true
			} else if !overflow {
				pending = append(pending, buf[:n]...)
			}
		}
		if err != nil {
			fin = !errors.Is(err, os.ErrDeadlineExceeded)
			break
		}
	}
	if fin {
		h.parked.waitUntil(ex.start.Add(ex.latency))
	}
	ex.rec.LatencyWaited = time.Since(began)
	_ = c.SetReadDeadline(time.Time{})
	ex.answerParked(c, pending, fin, overflow)
}

// answerParked writes a parked answer when it is due, records the
// request, and hands the connection back to the server unless it closes:
// after the client's FIN (fin), too much sent ahead (overflow), a request
// or answer that says close, or when Doppel stops.
func (ex *exchange) answerParked(c net.Conn, pending []byte, fin, overflow bool) {
	h := ex.handler
	closing := fin || overflow || ex.req.Close || h.parked.ending.Load() ||
		headerSaysClose(ex.header)
	ex.rec.Duration = time.Since(ex.start)
	answer := ex.parkedAnswer(closing)
	_ = c.SetWriteDeadline(time.Now().Add(parkedWrite))
	_, werr := c.Write(answer)
	_ = c.SetWriteDeadline(time.Time{})
	ex.held = nil
	if werr != nil || fin && !tookAnswer(c) {
		ex.rec.Status = statusClientLeft
	}
	h.logRequest(ex)
	if werr != nil || closing {
		_ = c.Close()
		return
	}
	rc := &resumedConn{Conn: c, pending: pending}
	h.handedBack.add(rc)
	// Serve returns at once: the connection is served by a goroutine of
	// the server's, or closed when the server is shutting down.
	_ = h.server.Serve(&oneConn{c: rc, addr: c.LocalAddr()})
}

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

func headerSaysClose(h http.Header) bool { return hasToken(h["Connection"], "close") }

// parkedAnswer is the held answer as net/http would have written it: the
// status line, the handler's header (with the request id and receipt,
// which go into it as for any answer), then what the server adds (Date,
// Content-Length, a sniffed Content-Type, Connection: close), then the
// body.
func (ex *exchange) parkedAnswer(closing bool) []byte {
	code := ex.rec.Status
	hdr := ex.header
	hdr.Set(headerRequestID, ex.rec.RequestID)
	if ex.wantsReceipt() {
		hdr.Set(headerReceipt, receipt(&ex.rec))
	}
	body := ex.held
	if ex.req.Method == http.MethodHead || !bodyAllowedForStatus(code) {
		body = nil
	}
	var b bytes.Buffer
	b.Grow(256 + len(body))
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		b.WriteString(text)
	} else {
		b.WriteString("status code ")
		b.WriteString(strconv.Itoa(code))
	}
	b.WriteString("\r\n")
	_ = hdr.Write(&b)
	if _, ok := hdr["Date"]; !ok {
		b.WriteString("Date: ")
		b.WriteString(time.Now().UTC().Format(http.TimeFormat))
		b.WriteString("\r\n")
	}
	if bodyAllowedForStatus(code) {
		if _, ok := hdr["Content-Length"]; !ok && ex.req.Method != http.MethodHead {
			b.WriteString("Content-Length: ")
			b.WriteString(strconv.Itoa(len(body)))
			b.WriteString("\r\n")
		}
		if _, ok := hdr["Content-Type"]; !ok && len(body) > 0 {
			b.WriteString("Content-Type: ")
			b.WriteString(http.DetectContentType(body))
			b.WriteString("\r\n")
		}
	}
	if closing && !headerSaysClose(hdr) {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// bodyAllowedForStatus is net/http's rule: 1xx, 204 and 304 carry none.
func bodyAllowedForStatus(code int) bool {
	switch {
	case code >= 100 && code <= 199, code == http.StatusNoContent, code == http.StatusNotModified:
		return false
	}
	return true
}

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

// Stopping makes parked answers close their connections from now on: for
// a stopping Doppel, before its server shuts down.
func (h *Handler) Stopping() {
	ps := &h.parked
	ps.mu.Lock()
	ps.ending.Store(true)
	ps.mu.Unlock()
}

// EndParked lets parked answers finish until ctx is done, then answers
// the rest at once; each closes its connection after its answer and is
// recorded before this returns. For a stopping Doppel, after its server
// has shut down (which does not know the connections it handed over).
func (h *Handler) EndParked(ctx context.Context) {
	ps := &h.parked
	h.Stopping() // and no add between the check and the wait
	waited := make(chan struct{})
	go func() {
		ps.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return
	case <-ctx.Done():
	}
	ps.end(func(c net.Conn) { _ = c.SetReadDeadline(time.Now()) })
	<-waited
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
		if prev != nil {
			prev(c, st)
		}
	}
	srv.RegisterOnShutdown(h.handedBack.closeAll)
}
