package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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

	// writesBound is when the connection's write deadline was last moved
	// (boundWrites).
	writesBound time.Time
	// While the answer is held (answerHeld, hold.go) its status is in
	// rec, its body in held, and nothing has gone to the server yet;
	// header is the answer's once the connection is taken.
	held   []byte
	header http.Header
	// answer is how far the answer has gone (to moves it); fin says the
	// HTTP/1 client sent its FIN while the latency was waited: whether it
	// took the answer is known once it is written. They sit together, in
	// one word.
	answer answerState
	fin    bool

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

// answerState is how far an exchange's answer has gone. It only moves
// forward, through to: a later step never undoes an earlier one, and the
// two ends (cut, detached) are final.
type answerState uint8

const (
	// answerNone: nothing answered yet; the first final WriteHeader
	// decides.
	answerNone answerState = iota
	// answerHeld: the status is decided and the answer held whole, to be
	// written off the server when its latency ends (hold.go).
	answerHeld
	// answerStarted: the answer goes through the server (or the client
	// left before it): a later WriteHeader is ignored.
	answerStarted
	// answerCut: a fault or the client's departure cut the connection;
	// nothing more goes out.
	answerCut
	// answerDetached: a hang or a parked answer took the connection, and
	// records the request itself when done.
	answerDetached
)

// over reports whether the connection is no longer the server's to write
// on: cut, or taken.
func (a answerState) over() bool { return a >= answerCut }

// to moves the answer on to a, unless it is there or further already, or
// over.
func (ex *exchange) to(a answerState) {
	if !ex.answer.over() && a > ex.answer {
		ex.answer = a
	}
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
	if ex.answer != answerNone {
		return
	}
	if code >= 100 && code < 200 {
		if code != http.StatusSwitchingProtocols {
			// Informational answers (100 Continue, 103 Early Hints; a mock's
			// or a loss's 1xx too) pass at once and do not count as the
			// response: what follows completes it, as 200 when nothing else.
			ex.boundWrites()
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
		// discards what is left of the body. Reading may answer 100
		// Continue.
		ex.boundWrites()
		ex.readUnreadBody()
	}
	if ex.latency > 0 && time.Since(ex.start) < ex.latency && ex.mayHold(code) {
		// The answer waits off the server once complete (park.go).
		ex.to(answerHeld)
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
	ex.boundWrites() // the server writes the header by the next flush
	ex.to(answerStarted)
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
	ex.to(answerStarted)
	ex.rec.Status = statusClientLeft
	ex.rec.Duration = time.Since(ex.start)
}

// closeUnanswered closes an HTTP/1 connection with a FIN and no answer
// after clientLeft: the server would otherwise write an empty 200 of its
// own, which a client that only half-closed its side would read as the
// upstream's answer.
func (ex *exchange) closeUnanswered() {
	if c := ex.hijack(false); c != nil {
		ex.to(answerCut)
		closeConn(c, false)
	}
}

func (ex *exchange) Write(b []byte) (int, error) {
	if ex.answer.over() {
		return 0, http.ErrHijacked
	}
	if ex.answer == answerNone {
		ex.WriteHeader(http.StatusOK)
	}
	if ex.answer == answerHeld {
		n, err := ex.hold(b)
		if c := ex.rec.ResponseBody; c != nil && n > 0 {
			c.Add(b[:n])
		}
		return n, err
	}
	if c := ex.rec.ResponseBody; c != nil {
		c.Add(b)
	}
	if ex.base != nil {
		return ex.w.Write(b) // the connection's writer bounds it, under the faults'
	}
	return boundedWrite(ex, ex.w, b)
}

// boundedWrite writes b to w in pieces of at most writePiece, moving the
// write deadline before each: the deadline bounds a whole Write call, so a
// large body written at once (a mock's) would cut a client that reads it
// steadily but slowly.
func boundedWrite(ex *exchange, w io.Writer, b []byte) (int, error) {
	n := 0
	for {
		ex.boundWrites()
		piece := b[n:min(len(b), n+writePiece)]
		m, err := w.Write(piece)
		n += m
		if err != nil || n == len(b) {
			return n, err
		}
	}
}

// writePiece is the most boundedWrite writes at once: a client is cut
// only if it reads less than writePiece in writeStall (about 2 KiB a
// second).
const writePiece = 64 << 10

// writeStall bounds how long a client may leave an answer unread: a write
// to the connection that it does not take within writeStall fails, and
// the answer is cut, so a client that stops reading holds the handler,
// its buffers and the upstream's connection that long at most.
const writeStall = 30 * time.Second

// writeDeadliner is the connection's writer, net/http's: its
// SetWriteDeadline is the connection's.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// boundWrites keeps an HTTP/1 connection's write deadline writeStall
// ahead of the answer's latest write, moving it at most once a second: a
// request starts with one move, and a write or flush a second or more
// later moves it again. A write of the answer that the client does not
// take within writeStall then fails; between writes the deadline may
// pass, which nothing notices. Hijacking takes the deadline off (Hijack);
// a parked answer sets its own (park.go). HTTP/2 is left alone: a
// stream's write deadline resets the stream when it passes, written to
// or not, which would end long waits and quiet streams.
func (ex *exchange) boundWrites() {
	if ex.req.ProtoMajor != 1 || ex.tunnel != nil { // a tunnel's connection waits as it likes
		return
	}
	now := time.Now()
	if now.Sub(ex.writesBound) < time.Second {
		return
	}
	ex.writesBound = now
	if d, ok := ex.conn.(writeDeadliner); ok {
		_ = d.SetWriteDeadline(now.Add(writeStall))
	}
}

// Flush and Unwrap let ReverseProxy stream and upgrade through the wrapper.
func (ex *exchange) Flush() {
	if ex.answer.over() {
		return
	}
	if ex.answer == answerNone {
		ex.WriteHeader(http.StatusOK)
	}
	if ex.answer == answerHeld {
		ex.release() // a stream: it waits in the handler
	}
	ex.boundWrites()
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
	switching := ex.answer == answerNone
	if switching {
		ex.switchProtocols()
	}
	c, brw, err := h.Hijack()
	if err == nil {
		// The connection is the tunnel's now: its writes wait for the
		// client as long as it likes.
		_ = c.SetWriteDeadline(time.Time{})
	}
	if err != nil || !switching {
		return c, brw, err
	}
	ex.to(answerStarted)
	ex.rec.Duration = time.Since(ex.start)
	return ex.tunnelOn(c, brw)
}
