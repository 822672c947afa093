package proxy

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// exchange is one request's state: what was decided, what happened, and
// the ResponseWriter every answer goes through. Holding the first final
// WriteHeader until the latency target is reached makes the delay apply to
// whatever answers (upstream, mock or error) without any of them knowing.
type exchange struct {
	w     http.ResponseWriter
	req   *http.Request
	start time.Time

	requestID string
	runtime   *runtime.Runtime // the one in force when the request arrived
	proxy     *runtime.Proxy
	mock      string
	path      string // the request path as sent, escaped, without the query
	target    string // the built upstream path, escaped

	// latency is the whole-response target; zero when the roll did not fire.
	latency        time.Duration
	latencyFired   bool
	latencyWaited  time.Duration
	lossInjected   bool
	replaced       bool        // a mock was chosen to answer
	errCode        apierr.Code // the envelope's code when Doppel answered with one
	upstreamFailed bool        // a transport failure or the proxy's timeout

	wroteHeader bool
	status      int
	headerAt    time.Duration

	// timeout cancels the upstream exchange when the proxy's timeout has
	// passed; timeoutLeft is its budget as of upstreamStart.
	timeout     *time.Timer
	timeoutLeft time.Duration

	upstreamStart     time.Time
	upstreamContacted bool
	upstreamStatus    int
	upstreamDuration  time.Duration
	upstreamConn      *headerConn // the HTTP/1 connection that answered, if NewTransport dialed it
}

func (ex *exchange) Header() http.Header { return ex.w.Header() }

func (ex *exchange) WriteHeader(code int) {
	if ex.wroteHeader {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// Informational answers (100 Continue, 103 Early Hints) pass at once
		// and do not count as the response.
		ex.w.WriteHeader(code)
		return
	}
	ex.waitLatency()
	ex.wroteHeader = true
	ex.status = code
	ex.headerAt = time.Since(ex.start)
	ex.w.Header().Set(headerRequestID, ex.requestID)
	ex.w.WriteHeader(code)
}

// waitLatency waits out what is left of the latency target: the time
// already spent is subtracted, so a slow upstream is never delayed further.
// A client that goes away ends the wait.
func (ex *exchange) waitLatency() {
	if ex.latency <= 0 {
		return
	}
	remaining := ex.latency - time.Since(ex.start)
	if remaining <= 0 {
		return
	}
	began := time.Now()
	paused := ex.timeout != nil && ex.timeout.Stop()
	t := time.NewTimer(remaining)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ex.req.Context().Done():
	}
	ex.latencyWaited = time.Since(began)
	if paused {
		ex.timeout.Reset(ex.timeoutLeft - began.Sub(ex.upstreamStart))
	}
}

// fail answers with Doppel's own error envelope.
func (ex *exchange) fail(code apierr.Code, message string) {
	ex.failStatus(code.Status(), code, message)
}

func (ex *exchange) failStatus(status int, code apierr.Code, message string) {
	ex.errCode = code
	apierr.WriteStatus(ex, status, code, message)
}

// statusClientLeft is logged for a request whose client disconnected
// before its answer began.
const statusClientLeft = 499

// clientLeft records that the client disconnected before any answer.
func (ex *exchange) clientLeft() {
	ex.wroteHeader = true
	ex.status = statusClientLeft
	ex.headerAt = time.Since(ex.start)
}

func (ex *exchange) Write(b []byte) (int, error) {
	if !ex.wroteHeader {
		ex.WriteHeader(http.StatusOK)
	}
	return ex.w.Write(b)
}

// Flush and Unwrap let ReverseProxy stream and upgrade through the wrapper.
func (ex *exchange) Flush() {
	if !ex.wroteHeader {
		ex.WriteHeader(http.StatusOK)
	}
	if f, ok := ex.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (ex *exchange) Unwrap() http.ResponseWriter { return ex.w }

// Hijack is used by protocol upgrades (101 Switching Protocols).
func (ex *exchange) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := ex.w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijacking is not supported")
	}
	return h.Hijack()
}
