package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// bodyIdle bounds how long one read of a request body may wait for the
// client's next byte; the proxy's timeout bounds the whole body.
const bodyIdle = 10 * time.Second

// bodyReader reads a request body for the upstream or a mock, holding
// each read to bodyIdle and all of them to the proxy's timeout, through
// the connection's read deadline: a client that stops sending is answered
// (408) and its connection closed, rather than holding a handler until it
// leaves. It remembers what went wrong, so the answer blames the client
// for the client's mistakes.
type bodyReader struct {
	body  io.ReadCloser
	rc    *http.ResponseController
	whole time.Time // when the proxy's timeout passes
	// capture keeps the first bytes for the journal; nil when it is off.
	capture *telemetry.Capture

	// The transport reads the body from a goroutine of its own.
	mu      sync.Mutex
	err     error // the first read error other than EOF
	done    bool  // the body was read to its end
	reading bool  // a read is waiting for the client
}

func newBodyReader(ex *exchange, whole time.Time) *bodyReader {
	return &bodyReader{body: ex.req.Body, rc: http.NewResponseController(ex.conn), whole: whole, capture: ex.rec.RequestBody}
}

// sendsBody reports whether a request comes with a body to read.
func sendsBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }

func (b *bodyReader) Read(p []byte) (int, error) {
	deadline := time.Now().Add(bodyIdle)
	if b.whole.Before(deadline) {
		deadline = b.whole
	}
	_ = b.rc.SetReadDeadline(deadline)
	b.mu.Lock()
	b.reading = true
	b.mu.Unlock()
	n, err := b.body.Read(p)
	b.mu.Lock()
	if b.capture != nil && n > 0 {
		b.capture.Add(p[:n])
	}
	b.reading = false
	if err == io.EOF {
		b.done = true
	} else if err != nil && b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
	return n, err
}

func (b *bodyReader) Close() error { return b.body.Close() }

// blame says whether the client is at fault for a failed exchange: its
// body could not be read (malformed, cut short) or did not come in time.
// An exchange that ran out of time while a read was waiting for the
// client is the client's: the upstream was not holding it back.
func (b *bodyReader) blame() (stalled, malformed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		return b.reading && !b.done, false
	}
	var timeout interface{ Timeout() bool }
	if errors.As(b.err, &timeout) && timeout.Timeout() {
		return true, false
	}
	if errors.Is(b.err, http.ErrBodyReadAfterClose) || errors.Is(b.err, http.ErrHandlerTimeout) {
		return false, false
	}
	return false, true
}

// clientAtFault answers a failed read of the request body as the client's
// doing, when it is: 408 for a body that stopped coming, 400 for one that
// is malformed or cut short. The connection is closed after either: what
// is left of the body on it cannot be trusted.
func (ex *exchange) clientAtFault(b *bodyReader) bool {
	stalled, malformed := b.blame()
	switch {
	case stalled:
		ex.Header().Set("Connection", "close")
		ex.fail(apierr.RequestTimeout, fmt.Sprintf("the request body stopped coming: no byte for %s, or not all of it within the proxy's timeout of %s", bodyIdle, ex.proxy.Timeout))
	case malformed:
		ex.Header().Set("Connection", "close")
		ex.fail(apierr.InvalidRequestBody, "the request body could not be read: "+b.err.Error())
	default:
		return false
	}
	// Nothing more is read from this connection: the server would
	// otherwise wait for the rest of the body before closing it.
	_ = b.rc.SetReadDeadline(time.Now())
	return true
}

// endCapture stops capturing, and runs record while no read can add to
// the capture: the transport may still be reading the body from a
// goroutine of its own when the answer is complete.
func (b *bodyReader) endCapture(record func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.capture = nil
	record()
}

// journalReadWait bounds how long the journal waits for a body nothing
// read (a mock that does not extract from it).
const journalReadWait = time.Second

// readUnreadBody reads, for the journal, the first bytes of a body that
// nothing read (a mock that does not extract from it), as the answer
// starts: the server would read and discard it anyway to reuse the
// connection. A client that sends no more is waited for journalReadWait
// at most.
func (ex *exchange) readUnreadBody() {
	c := ex.rec.RequestBody
	// A forwarded body is the transport's to read, from its own goroutine.
	if c == nil || ex.body != nil || len(c.Bytes) > 0 || c.Cut || !sendsBody(ex.req) {
		return
	}
	br := newBodyReader(ex, time.Now().Add(journalReadWait))
	_, _ = io.CopyN(io.Discard, br, int64(c.Limit)+1)
	_ = br.rc.SetReadDeadline(time.Time{})
}
