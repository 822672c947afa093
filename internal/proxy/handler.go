// Package proxy is the proxy listener's handler. A request goes through the
// stages of the fixed order, one function each:
//
//  1. resolve which proxy handles it
//  2. confine its path to that proxy's upstream
//  3. does a mock match, and does replace fire?
//  4. the faults that apply, in their order: one that answers in place of
//     the answer stops here
//  5. answer (mock or upstream), waiting out what is left of the latency
//
// The handler reads the Runtime in force through an atomic pointer and
// takes no lock shared by all requests. It knows the stages of a fault,
// never which faults exist.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"runtime/debug"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/render"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/session"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

const headerRequestID = "X-Request-Id"

// Handler serves the proxy listener.
type Handler struct {
	metrics   *telemetry.Metrics
	reporter  *telemetry.Reporter
	runtime   *runtime.Holder
	roller    fault.Roller
	attempts  bool // count attempts per request id: rolls are seeded
	envTokens map[config.TokenDigest]string
	log       *telemetry.Logger
	forward   *httputil.ReverseProxy
	// forwardH2C carries gRPC calls to http:// upstreams, as cleartext
	// HTTP/2 with prior knowledge: gRPC has no HTTP/1.1.
	forwardH2C *httputil.ReverseProxy
	templates  *render.Files
	external   *External
	journal    *journal.Journal
	sessions   *session.Registry
	hangs      heldConns
	// parked are the connections of delayed answers waiting off the
	// server; server is the one they go back to (nil: none is parked).
	parked     heldConns
	server     *http.Server
	handedBack handedBack
	// forwardedProto is X-Forwarded-Proto's value when the client sent
	// none: https when the listener serves TLS (Options.TLS).
	forwardedProto string
}

// Options configure a Handler.
type Options struct {
	// Roller decides every fault; fault.Random{} when nil.
	Roller fault.Roller
	// Log receives one line per request; nothing is logged when nil.
	Log *telemetry.Logger
	// Transport reaches the upstreams; NewTransport() when nil.
	Transport http.RoundTripper
	// Templates reads mocks' template files; when nil, a mock naming a
	// file answers TEMPLATE_NOT_FOUND.
	Templates *render.Files
	// External is Doppel's own address, which redirects and bodies naming
	// an upstream are rewritten to; nothing is rewritten when nil.
	External *External
	// Metrics receives every request; nothing is recorded when nil.
	Metrics *telemetry.Metrics
	// Reporter receives recovered panics (Sentry); nil reports nothing.
	Reporter *telemetry.Reporter
	// AdminTokens are the admin tokens of the environment by digest, name
	// by name (the document's are the runtime's): removed from requests.
	AdminTokens map[config.TokenDigest]string
	// Journal records every request; nothing is recorded when nil or
	// off (journal.size 0).
	Journal *journal.Journal
	// Sessions are the live sessions; none apply when nil.
	Sessions *session.Registry
	// TLS says the listener serves TLS: forwarded requests say
	// X-Forwarded-Proto: https. Read from here, not from the request,
	// because the listener's connections reach the server wrapped (no
	// *tls.Conn), as do those handed back after a parked answer.
	TLS bool
}

// New builds the handler over the runtime held by h.
func New(h *runtime.Holder, opts Options) *Handler {
	if opts.Roller == nil {
		opts.Roller = fault.Random{}
	}
	if opts.Log == nil {
		opts.Log = telemetry.Nop()
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport()
	}
	_, random := opts.Roller.(fault.Random)
	handler := &Handler{
		runtime:   h,
		roller:    opts.Roller,
		attempts:  !random,
		log:       opts.Log,
		templates: opts.Templates,
		external:  opts.External,
		metrics:   opts.Metrics,
		reporter:  opts.Reporter,
		envTokens: opts.AdminTokens,
		journal:   opts.Journal,
		sessions:  opts.Sessions,
	}
	handler.parked.stop = make(chan struct{})
	handler.forwardedProto = "http"
	if opts.TLS {
		handler.forwardedProto = "https"
	}
	handler.forward = handler.newForwarder(opts.Transport, opts.Log.Logger)
	handler.forwardH2C = handler.newForwarder(NewH2CTransport(), opts.Log.Logger)
	return handler
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ex := &exchange{w: w, conn: w, req: r, start: time.Now(), handler: h}
	// Before anything can write: net/http's own "100 Continue" included.
	ex.boundWrites()
	id, minted := h.requestID(r)
	ex.rec = telemetry.Exchange{RequestID: id, Method: r.Method, Path: loggedPath(r)}
	if j := h.journal.Active(); j != nil {
		ex.journaled(j)
	}
	defer h.finish(ex)
	rt := h.runtime.Load()

	h.withholdAdminToken(ex, rt)
	// 1. Resolve.
	ex.runtime = rt
	p := h.resolve(ex, rt)
	if p == nil {
		return
	}
	// A session's overlay on this proxy stands in for it. While no
	// session is live, the header is not even read.
	if h.sessions.Any() {
		p = h.inSession(ex, rt, p)
	}
	// 2. Confine.
	if !h.confine(ex, p) {
		return
	}
	// 3. A mock that matches and wins its replace roll answers; one that
	//    loses is as if it did not match.
	key := fault.Key{Proxy: p.Name, RequestID: ex.rec.RequestID}
	if h.attempts && !minted {
		// An id Doppel minted never comes back: only the client's count.
		var where fault.Where
		key.Attempt, where = p.Attempts.NextIn(ex.req.Context(), ex.rec.RequestID)
		ex.Counted(where)
	}
	m, sub := h.choose(ex, p, key)
	// 4. The faults of what answers: a mock's (its own, and the proxy's
	//    latency when it has none), else the proxy's.
	faults := p.Faults
	if m != nil {
		faults, key.Mock = m.Faults, m.Name
	}
	if faults.Inject(h.roller, key, ex) {
		return
	}
	// 5. Answer.
	if m != nil {
		h.answerMock(ex, p, m, sub)
		return
	}
	h.forwardUpstream(ex, p)
}

// inSession is the proxy a request's session lays over p, or p: no
// session header, or one naming no live session over p (logged at
// debug).
func (h *Handler) inSession(ex *exchange, rt *runtime.Runtime, p *runtime.Proxy) *runtime.Proxy {
	v := ex.req.Header[rt.SessionHeader]
	if len(v) == 0 {
		return p
	}
	id := v[0]
	if !config.ValidSessionID(id) {
		h.log.Debug("the request's session id is malformed; it is served as no session", "request_id", ex.rec.RequestID, "header", rt.SessionHeader)
		return p
	}
	o := h.sessions.Lookup(id, p.Name)
	if o == nil {
		h.log.Debug("the request's session is not live over this proxy; it is served as no session", "request_id", ex.rec.RequestID, "session", id, "proxy", p.Name)
		return p
	}
	ex.proxy = o
	ex.rec.Session = id
	return o
}

// choose finds the mock that answers: the first that matches, if its
// replace roll fires.
func (h *Handler) choose(ex *exchange, p *runtime.Proxy, key fault.Key) (*runtime.Mock, []string) {
	m, sub := p.Match(ex.req.Method, collapseLeadingSlashes(ex.rec.Path))
	if m == nil {
		return nil, nil
	}
	key.Mock = m.Name
	if !m.Replace.Fires(h.roller, key) {
		return nil, nil
	}
	ex.rec.Mock = m.Name
	m.Hits.Add(1)
	h.metrics.MockHit(p.Name, m.Name)
	return m, sub
}

// withholdAdminToken removes an admin credential from a request to the
// proxy listener: the admin header, or Authorization, carrying a
// configured token. Neither an upstream nor a mock sees it, and the log
// line names the token, never its value. The same headers with any other
// value are the client's own and pass.
func (h *Handler) withholdAdminToken(ex *exchange, rt *runtime.Runtime) {
	// The admin API reads Authorization too.
	for _, header := range [...]string{rt.AdminHeader, "Authorization"} {
		for _, raw := range ex.req.Header[header] {
			token, ok := config.Bearer(raw)
			if !ok {
				continue
			}
			d := config.DigestOf(token)
			name, found := rt.AdminTokens[d]
			if !found {
				name, found = h.envTokens[d]
			}
			if found {
				delete(ex.req.Header, header)
				ex.rec.AdminTokenRemoved = name
				break
			}
		}
	}
}

// loggedPath is the path as sent, without the query: what mocks match,
// what templates see as `path`, and what the log line carries.
func loggedPath(r *http.Request) string {
	if p, ok := requestPath(r); ok {
		return p
	}
	return r.URL.EscapedPath()
}

// maxRequestID bounds the X-Request-ID a client may choose: the id is
// logged, sent upstream and, under a seed, hashed into every roll.
const maxRequestID = 200

// requestID reuses the client's X-Request-ID or mints one, 32 hex digits
// as 1.1 does (minted says which). An id longer than maxRequestID bytes, or with a byte
// outside visible ASCII, is replaced, and the debug log says why (not what
// it was).
func (h *Handler) requestID(r *http.Request) (id string, minted bool) {
	v := r.Header[headerRequestID]
	if len(v) == 0 || v[0] == "" {
		return telemetry.NewRequestID(), true
	}
	id = v[0]
	why := ""
	switch {
	case len(id) > maxRequestID:
		why = fmt.Sprintf("it is %d bytes; at most %d are kept", len(id), maxRequestID)
	case !visibleASCII(id):
		why = "it holds a byte outside visible ASCII"
	default:
		return id, false
	}
	id = telemetry.NewRequestID()
	h.log.Debug("the client's X-Request-ID is replaced by a new one", "request_id", id, "reason", why)
	return id, true
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (h *Handler) resolve(ex *exchange, rt *runtime.Runtime) *runtime.Proxy {
	if len(rt.Proxies) == 0 {
		ex.fail(apierr.NoProxiesConfigured, "no proxies are configured")
		return nil
	}
	p := rt.Resolve(ex.req.Header)
	if p == nil {
		ex.fail(apierr.ProxyNotResolved, "no proxy matched the request and no default proxy is configured: send a header that names one, or give one proxy `type: default`")
		return nil
	}
	ex.proxy = p
	ex.rec.Proxy = p.Name
	return p
}

func (h *Handler) confine(ex *exchange, p *runtime.Proxy) bool {
	path, ok := requestPath(ex.req)
	if !ok {
		ex.fail(apierr.InvalidRequestPath, "the request path would leave the proxy's upstream")
		return false
	}
	if ex.target, ok = buildTarget(p.BasePath, path); !ok {
		ex.fail(apierr.InvalidRequestPath, refusal(path))
	}
	return ok
}

func (h *Handler) forwardUpstream(ex *exchange, p *runtime.Proxy) {
	// The proxy's timeout bounds the upstream exchange, not the latency
	// Doppel injects on purpose: waitLatency stops this clock while it
	// waits and restarts it with what was left.
	ctx, cancel := context.WithCancelCause(ex.req.Context())
	defer cancel(nil)
	ex.timeout = time.AfterFunc(p.Timeout, func() { cancel(errUpstreamTimeout) })
	ex.timeoutLeft = p.Timeout
	defer ex.timeout.Stop()
	f := &forwarding{ctx: exchangeContext{Context: ctx, ex: ex}}
	ex.forwarding = f
	// GotConn tells modifyResponse which connection answered.
	f.trace.GotConn = ex.gotConn
	ctx = withHTTP1Only(httptrace.WithClientTrace(&f.ctx, &f.trace), ex.req.Header)
	ex.upstreamStart = time.Now()
	ex.rec.UpstreamContacted = true // from here a connection is attempted
	out := ex.req.WithContext(ctx)
	if sendsBody(out) {
		ex.body = newBodyReader(ex, ex.upstreamStart.Add(p.Timeout))
		out.Body = ex.body
	}
	if p.Upstream.Scheme == "http" && isNativeGRPC(out) {
		h.forwardH2C.ServeHTTP(ex, out)
		return
	}
	h.forward.ServeHTTP(ex, out)
}

// isNativeGRPC reports whether r is a gRPC call over HTTP/2 (not gRPC-Web,
// which is HTTP/1.1's).
func isNativeGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return r.ProtoMajor == 2 && (ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;"))
}

// errUpstreamTimeout is why an exchange that ran out of time was cancelled.
var errUpstreamTimeout = errors.New("the proxy's timeout passed")

// finish writes the request's log line once the answer is complete, also
// when the handler panicked: a panic before the answer started becomes a
// 500 envelope; after it started, the connection is aborted.
func (h *Handler) finish(ex *exchange) {
	if ex.answer == answerDetached {
		return // a hang records the request when it ends
	}
	if v := recover(); v != nil {
		if v != http.ErrAbortHandler {
			h.log.Error("panic while serving a request", "request_id", ex.rec.RequestID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			h.reporter.Report(fmt.Errorf("panic while serving request %s: %v", ex.rec.RequestID, v))
			if ex.answer == answerNone {
				ex.fail(apierr.InternalError, "internal error")
				h.logRequest(ex)
				return
			}
		}
		// The answer has begun: the only honest thing left is to break the
		// connection, so the client cannot take a cut body for a whole one.
		h.logRequest(ex)
		panic(http.ErrAbortHandler)
	}
	// What the server still writes (a stream's end, a fault's last
	// bytes) is bounded from now, not from the last write.
	ex.boundWrites()
	if ex.base != nil && ex.answer != answerCut {
		// A fault's writer may cut now; on HTTP/2 a cut aborts the
		// handler, and the request is recorded first.
		defer func() {
			if v := recover(); v != nil {
				h.logRequest(ex)
				panic(v)
			}
		}()
		ex.endWriters()
	}
	if ex.answer == answerNone {
		ex.WriteHeader(http.StatusOK)
	}
	if ex.answer == answerHeld && ex.park() {
		return // the parked answer records the request when written
	}
	if ex.fin && ex.answer != answerCut && ex.tunnel == nil && ex.awaitVerdict() {
		return // its connection records the request when it closes
	}
	h.logRequest(ex)
}

// logRequest records a finished request: its one record feeds the
// metrics, the request line and the journal.
func (h *Handler) logRequest(ex *exchange) {
	if p := ex.proxy; p != nil && p.Counted && p.Counters.Forgot() {
		h.log.Warn("a fault condition's counters are full: the oldest keys are forgotten from now on",
			"proxy", p.Name, "session", ex.rec.Session, "keys", p.Counters.Max())
	}
	if ex.tunnel != nil {
		ex.rec.Tunnel = ex.tunnel.record()
	}
	h.metrics.ObserveProxy(&ex.rec)
	h.log.LogRequest(&ex.rec)
	if ex.journal == nil {
		return
	}
	record := func() { ex.journal.Record(&ex.rec, ex.start) }
	if ex.body != nil {
		ex.body.endCapture(record)
		return
	}
	record()
}
