package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// exchange is one request's state: what was decided, what happened, and
// the ResponseWriter every answer goes through. Holding the first final
// WriteHeader until the latency target is reached makes the delay apply to
// whatever answers (upstream, mock or error) without any of them knowing.
// It is the fault.Exchange that faults act on.
type exchange struct {
	// w is what answers are written to: the connection's writer, or a
	// fault's in front of it (Wrap). conn is always the connection's.
	w     http.ResponseWriter
	conn  http.ResponseWriter
	req   *http.Request
	start time.Time

	// rec is what the log line and the metrics say of this request.
	rec telemetry.Exchange
	// counted is where its counts were kept, as rec.Counter says.
	counted fault.Where
	// faultsBuf backs rec.Faults, so that recording a fault allocates
	// nothing; the captures back the record's bodies while the journal
	// is on.
	faultsBuf                 [4]string
	requestBody, responseBody telemetry.Capture

	runtime *runtime.Runtime // the one in force when the request arrived
	proxy   *runtime.Proxy
	target  string // the built upstream path, escaped

	// latency is the whole-response target; zero when no delay applies.
	latency time.Duration

	// The flags sit together: one word between them, not one each.
	wroteHeader bool
	// holding says the answer is held (park.go): its status is in rec,
	// its body in held, and nothing has gone to the server yet; header
	// is the answer's once the connection is taken.
	holding bool
	// fin says the HTTP/1 client sent its FIN while the latency was
	// waited: whether it took the answer is known once it is written.
	fin bool
	// cut says a fault cut the connection; detached that a hang took it,
	// and records the request itself when done.
	cut, detached bool
	held          []byte
	header        http.Header

	// base is the connection's writer under the faults' (Wrap), nil
	// while none wraps.
	base    *connWriter
	handler *Handler
	// tunnel is the client's side of an upgraded connection, once the
	// upstream switched protocols.
	tunnel *tunnel

	// timeout cancels the upstream exchange when the proxy's timeout has
	// passed; timeoutLeft is its budget as of upstreamStart.
	timeout     *time.Timer
	timeoutLeft time.Duration

	upstreamStart time.Time
	body          *bodyReader // the request body as read for the upstream, if any
	upstreamConn  *headerConn // the HTTP/1 connection that answered, if NewTransport dialed it
	// forwarding is what only a forwarded exchange needs; nil until
	// forwardUpstream.
	forwarding *forwarding

	// journal records the exchange when the journal is on; nil otherwise,
	// and then nothing of it is captured.
	journal *journal.Recorder

	// requestID backs the answer's X-Request-Id (setValue).
	requestID [1]string
}

// forwarding is what forwarding an exchange makes once (the outbound
// request's context, its URL, the trace, the header values Doppel sets),
// in one allocation beside the exchange's, where each would be one of its
// own; an answer from a mock or a fault needs none of it.
type forwarding struct {
	ctx exchangeContext
	url url.URL
	// trace tells gotConn which connection serves the exchange.
	trace  httptrace.ClientTrace
	values [nValues]string
}

// The outbound request's header values, one slot each in
// forwarding.values.
const (
	valueForwardedFor = iota
	valueForwardedHost
	valueForwardedProto
	valueRequestID
	nValues
)

// setValue sets h[key] (a canonical name, as Header.Set would make it) to
// the one value in slot, set to v. The slice is capped at that value, so
// an Add by anyone else copies it rather than writing over the next slot.
func setValue(h http.Header, key string, slot []string, v string) {
	slot[0] = v
	h[key] = slot[:1:1]
}

// journaled makes the record carry what the journal keeps of the request
// beyond what the log line does.
func (ex *exchange) journaled(j *journal.Recorder) {
	ex.journal = j
	r := &ex.rec
	r.Query = ex.req.URL.RawQuery
	r.Client = peerIP(ex.req.RemoteAddr)
	r.RequestHeader = ex.req.Header
	r.ResponseHeader = ex.conn.Header()
	if n := j.Bodies(); n > 0 {
		ex.requestBody.Limit, ex.responseBody.Limit = n, n
		r.RequestBody, r.ResponseBody = &ex.requestBody, &ex.responseBody
	}
}

// peerIP is the client's address without its port.
func peerIP(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

var _ fault.Exchange = (*exchange)(nil)

func (ex *exchange) Header() http.Header { return ex.w.Header() }

func (ex *exchange) WriteHeader(code int) {
	if ex.wroteHeader {
		return
	}
	if code >= 100 && code < 200 {
		if code != http.StatusSwitchingProtocols {
			// Informational answers (100 Continue, 103 Early Hints; a mock's
			// or a loss's 1xx too) pass at once and do not count as the
			// response: what follows completes it, as 200 when nothing else.
			ex.w.WriteHeader(code)
			return
		}
		// Only Doppel's own 101 (a mock's or a loss's status) comes here:
		// ReverseProxy writes an upstream's upgrade on the hijacked
		// connection. It switches to no protocol, so nothing can follow it
		// on this connection; left open, the client would wait for the new
		// protocol's first bytes until a timeout.
		ex.w.Header().Set("Connection", "close")
	}
	if ex.journal != nil {
		// Before anything of the answer leaves: once it does, the server
		// discards what is left of the body.
		ex.readUnreadBody()
	}
	if ex.latency > 0 && time.Since(ex.start) < ex.latency && ex.mayHold(code) {
		// The answer waits off the server once complete (park.go).
		ex.wroteHeader, ex.holding = true, true
		ex.rec.Status = code
		return
	}
	if !ex.waitLatency() {
		ex.clientLeft()
		return
	}
	ex.sendHeader(code)
}

// sendHeader starts the answer on the connection.
func (ex *exchange) sendHeader(code int) {
	ex.wroteHeader = true
	ex.rec.Status = code
	ex.rec.Duration = time.Since(ex.start)
	setValue(ex.w.Header(), headerRequestID, ex.requestID[:], ex.rec.RequestID)
	if ex.wantsReceipt() {
		ex.w.Header().Set(headerReceipt, receipt(&ex.rec))
	}
	ex.w.WriteHeader(code)
}

// waitLatency waits out what is left of the latency target: the time
// already spent is subtracted, so a slow upstream is never delayed further.
// It reports false when the client has gone: on HTTP/2, its stream or its
// connection ended. On HTTP/1 the request's context ends on the client's
// FIN, which a client that only half-closed its side sends too, and that
// client still reads: the wait goes on, and the connection tells once the
// answer is written whether the client took it (fin; verdict.go).
func (ex *exchange) waitLatency() bool {
	if ex.latency <= 0 {
		return true
	}
	remaining := ex.latency - time.Since(ex.start)
	if remaining <= 0 {
		return true
	}
	began := time.Now()
	paused := ex.timeout != nil && ex.timeout.Stop()
	t := time.NewTimer(remaining)
	defer t.Stop()
	here := true
	select {
	case <-t.C:
	case <-ex.req.Context().Done():
		if ex.req.ProtoMajor != 1 {
			here = false
			break
		}
		ex.fin = true
		select {
		case <-t.C:
		case <-ex.handler.parked.stop: // Doppel stops: answer now
		}
	}
	ex.rec.LatencyWaited = time.Since(began)
	if paused {
		ex.timeout.Reset(ex.timeoutLeft - began.Sub(ex.upstreamStart))
	}
	return here
}

// fail answers with Doppel's own error envelope.
func (ex *exchange) fail(code apierr.Code, message string) {
	ex.Fail(code.Status(), code, message)
}

// Fail answers with the envelope under status (a loss answers with its own).
func (ex *exchange) Fail(status int, code apierr.Code, message string) {
	ex.rec.ErrorCode = string(code)
	apierr.WriteStatus(ex, status, code, message)
}

// FailGRPC answers a gRPC call with a gRPC status and no message: the
// trailers-only form, which every gRPC client reads as the call's end. The
// record says LOSS_INJECTED as for an envelope.
func (ex *exchange) FailGRPC(status int, message string) {
	ex.rec.ErrorCode = string(apierr.LossInjected)
	h := ex.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(status))
	h.Set("Grpc-Message", grpcMessage(message))
	h.Del("Content-Length")
	ex.WriteHeader(http.StatusOK)
}

// grpcMessage percent-encodes what gRPC's grpc-message may not carry
// as it is: bytes outside printable ASCII, and the percent sign.
func grpcMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Delay sets the whole-response target.
func (ex *exchange) Delay(d time.Duration) { ex.latency = d }

// Fired records that a fault fired.
func (ex *exchange) Fired(name, detail string) {
	if ex.rec.Faults == nil {
		ex.rec.Faults = ex.faultsBuf[:0]
	}
	ex.rec.Fire(name, detail)
}

// Counted records where the request's counts were kept: locally when
// any was.
func (ex *exchange) Counted(where fault.Where) {
	if where > ex.counted {
		ex.counted, ex.rec.Counter = where, where.String()
	}
}

// statusClientLeft is logged for a request whose client disconnected
// before its answer began.
const statusClientLeft = 499

// clientLeft records that the client disconnected before any answer.
func (ex *exchange) clientLeft() {
	ex.wroteHeader = true
	ex.rec.Status = statusClientLeft
	ex.rec.Duration = time.Since(ex.start)
}

// closeUnanswered closes an HTTP/1 connection with a FIN and no answer
// after clientLeft: the server would otherwise write an empty 200 of its
// own, which a client that only half-closed its side would read as the
// upstream's answer.
func (ex *exchange) closeUnanswered() {
	if c := ex.hijack(false); c != nil {
		ex.cut = true
		closeConn(c, false)
	}
}

func (ex *exchange) Write(b []byte) (int, error) {
	if ex.cut || ex.detached {
		return 0, http.ErrHijacked
	}
	if !ex.wroteHeader {
		ex.WriteHeader(http.StatusOK)
	}
	if ex.holding {
		n, err := ex.hold(b)
		if c := ex.rec.ResponseBody; c != nil && n > 0 {
			c.Add(b[:n])
		}
		return n, err
	}
	if c := ex.rec.ResponseBody; c != nil {
		c.Add(b)
	}
	return ex.w.Write(b)
}

// Flush and Unwrap let ReverseProxy stream and upgrade through the wrapper.
func (ex *exchange) Flush() {
	if ex.cut || ex.detached {
		return
	}
	if !ex.wroteHeader {
		ex.WriteHeader(http.StatusOK)
	}
	if ex.holding {
		ex.release() // a stream: it waits in the handler
	}
	// Through whatever wraps the connection's writer (a fault's: Wrap).
	_ = http.NewResponseController(ex.w).Flush()
}

func (ex *exchange) Unwrap() http.ResponseWriter { return ex.w }

// Hijack is used by protocol upgrades (101 Switching Protocols): the
// connection's own writer hijacks, whatever wraps it. ReverseProxy writes
// the upstream's 101 on the hijacked connection itself, so the answer is
// recorded here: nothing may be written through the writer afterwards.
func (ex *exchange) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := ex.conn.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijacking is not supported")
	}
	switching := !ex.wroteHeader
	if switching {
		ex.switchProtocols()
	}
	c, brw, err := h.Hijack()
	if err != nil || !switching {
		return c, brw, err
	}
	ex.wroteHeader = true
	ex.rec.Duration = time.Since(ex.start)
	return ex.tunnelOn(c, brw)
}
