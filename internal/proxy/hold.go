package proxy

import (
	"net/http"
	"strings"
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
//
// One idea a file: holding the answer (here), the wait off the server
// (park.go), the answer as net/http writes it (held_answer.go), the
// connection back to the server (resume.go), and the connections a
// stopping Doppel must end (held_conns.go).

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
	ex.to(answerStarted)
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
