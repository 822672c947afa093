package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// The wait of a held answer off the server (hold.go has the whole idea):
// on a timer for plain TCP, in a reading goroutine for TLS, then the
// answer written and the connection handed back (resume.go).

// parkedWrite bounds writing a parked answer to a client that does not
// read it, as writeStall does an answer written in the handler.
const parkedWrite = writeStall

// maxParkedPending bounds what a client may send ahead (pipelined
// requests) while its answer waits: more, and the connection closes
// after the answer.
const maxParkedPending = 64 << 10

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
	ex.to(answerDetached)
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
