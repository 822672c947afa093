package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
)

// The ReverseProxy hooks find the exchange they serve in the outbound
// request's context.
type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// exchangeContext is the context an exchange is forwarded under: the
// upstream exchange's own, answering exchangeKey with the exchange. It is
// held in the exchange, so it costs no allocation where context.WithValue
// would make one; whatever derives from it still finds the cancelCtx below
// through Value, and so waits on its Done with no goroutine of its own.
type exchangeContext struct {
	context.Context
	ex *exchange
}

func (c *exchangeContext) Value(key any) any {
	if key == (exchangeKey{}) {
		return c.ex
	}
	return c.Context.Value(key)
}

// NewTransport is the upstream transport: pooled keep-alive connections,
// plenty of idle ones per host, and no transparent compression, so encoded
// bodies pass byte for byte and no Accept-Encoding is ever added. Its
// HTTP/1 connections keep each answer's header block (see headerConn).
// https upstreams are dialed by DialTLSContext, not DialContext; it reads
// this transport's TLSClientConfig and TLSHandshakeTimeout as it dials (a
// Clone's dialer still reads the original's).
func NewTransport() *http.Transport {
	d := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
	}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialHeaderConn(d),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		DisableCompression:    true,
	}
	// Through an HTTP proxy, an https target's TLS is the transport's own,
	// over the CONNECT tunnel: those answers' blocks are not kept.
	t.DialTLSContext = dialTLS(t, d)
	return t
}

// NewH2CTransport reaches http:// upstreams in cleartext HTTP/2 with prior
// knowledge, for gRPC calls: pooled, and without compression as
// NewTransport.
func NewH2CTransport() *http.Transport {
	t := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:       1024,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
		Protocols:          new(http.Protocols),
	}
	t.Protocols.SetUnencryptedHTTP2(true)
	return t
}

// newForwarder is our forwarding: httputil.ReverseProxy with a Rewrite, a
// ModifyResponse and an ErrorHandler. The hop-by-hop handling, streaming,
// trailers and upgrades are the standard library's.
func (h *Handler) newForwarder(t http.RoundTripper, log *slog.Logger) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        rewrite,
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   errorHandler(log),
		Transport:      t,
		BufferPool:     bufferPool{},
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

func rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeFrom(pr.In.Context())
	p := ex.proxy
	in, out := pr.In, pr.Out

	// The built, confined path; the query exactly as sent.
	f := ex.forwarding
	f.url = *p.Upstream
	u := &f.url
	u.RawPath = ex.target
	u.Path, _ = url.PathUnescape(ex.target)
	u.RawQuery = in.URL.RawQuery
	u.ForceQuery = in.URL.ForceQuery
	u.User = nil
	out.URL = u
	out.Host = "" // the upstream sees its own authority
	// The request's trailers arrive after its body: the map the server
	// fills then is the one the transport sends from, not the empty copy
	// ReverseProxy made before the body was read.
	if in.Trailer != nil {
		out.Trailer = in.Trailer
	}

	h := out.Header
	for _, name := range ex.runtime.ResolutionHeaders {
		h.Del(name)
	}
	// TE is hop-by-hop; ReverseProxy would re-add "TE: trailers".
	h.Del("Te")
	// Forwarded is relayed untouched; Rewrite mode strips it first.
	if v := in.Header["Forwarded"]; v != nil {
		h["Forwarded"] = v
	}
	if peer, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		if prior := in.Header["X-Forwarded-For"]; len(prior) > 0 {
			peer = strings.Join(prior, ", ") + ", " + peer
		}
		setValue(h, "X-Forwarded-For", f.values[valueForwardedFor:], peer)
	}
	if in.Host != "" || len(in.Header["X-Forwarded-Host"]) > 0 {
		// An HTTP/1.0 request may name no host: then none is claimed.
		setOr(h, in.Header, "X-Forwarded-Host", f.values[valueForwardedHost:], in.Host)
	}
	setOr(h, in.Header, "X-Forwarded-Proto", f.values[valueForwardedProto:], ex.handler.forwardedProto)

	if user := p.Upstream.User; user != nil {
		pass, _ := user.Password()
		out.SetBasicAuth(user.Username(), pass)
	}
	for k, v := range p.Inject {
		h[k] = v
	}
	setValue(h, headerRequestID, f.values[valueRequestID:], ex.rec.RequestID)
}

// setOr keeps the client's value of an X-Forwarded header, else sets ours.
func setOr(out, in http.Header, key string, slot []string, value string) {
	if v := in[key]; len(v) > 0 {
		out[key] = v
		return
	}
	setValue(out, key, slot, value)
}

// modifyResponse records the upstream's answer, drops the headers its
// Connection field named when Go's transport deleted that field, then
// keeps the client behind the proxy: Location and text bodies naming the
// upstream are rewritten to name Doppel.
// maxHeldBody bounds the upstream body read ahead of an injected delay.
const maxHeldBody = 64 << 10

// holdWhileDelayed reads a small upstream body now when the answer is
// about to wait out an injected latency, so that the upstream connection
// goes back to the pool for the wait instead of being held by it: a
// thousand delayed requests in flight then need a few upstream
// connections, not a thousand. A body of unknown or larger size streams
// as before.
func (ex *exchange) holdWhileDelayed(res *http.Response) error {
	if ex.latency <= 0 || time.Since(ex.start) >= ex.latency || res.Request.Method == http.MethodHead ||
		!bodyAllowedForStatus(res.StatusCode) || res.ContentLength <= 0 || res.ContentLength > maxHeldBody || res.StatusCode == http.StatusSwitchingProtocols {
		return nil
	}
	b := make([]byte, res.ContentLength)
	if _, err := io.ReadFull(res.Body, b); err != nil {
		return err
	}
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

func (h *Handler) modifyResponse(res *http.Response) error {
	ex := exchangeFrom(res.Request.Context())
	ex.rec.UpstreamAnswered = true
	ex.rec.UpstreamStatus = res.StatusCode
	ex.rec.UpstreamDuration = time.Since(ex.upstreamStart)

	// Only an HTTP/1.1 answer saying close loses its Connection field
	// (HTTP/1.0 keeps it); a 101 keeps its hop-by-hop headers, as
	// ReverseProxy leaves them.
	if res.Close && res.ProtoMajor == 1 && res.StatusCode != http.StatusSwitchingProtocols &&
		res.Header["Connection"] == nil && ex.upstreamConn != nil {
		ex.upstreamConn.dropConnectionNamed(res.Header)
	}
	if ex.upstreamConn != nil {
		// An idle connection holds no block.
		ex.upstreamConn.release()
	}
	if err := ex.holdWhileDelayed(res); err != nil {
		return err
	}

	c := ex.proxy.Config
	loc := res.Header.Get("Location")
	redirects := *c.RewriteRedirects && loc != ""
	urls := *c.RewriteURLs && hasBody(res) && rewritable(res.Header)
	if !redirects && !urls {
		return nil
	}
	own := h.externalFor(ex)
	if own == nil {
		return nil
	}
	rw := newRewriter(ex.proxy, own)
	if redirects {
		if v, ok := rw.location(loc, res.Request.URL); ok {
			res.Header.Set("Location", v)
		}
	}
	if urls {
		return rw.rewriteBody(res, int64(c.BodyLimit))
	}
	return nil
}

func hasBody(res *http.Response) bool {
	switch {
	case res.Request.Method == http.MethodHead,
		res.StatusCode < 200, res.StatusCode == http.StatusNoContent, res.StatusCode == http.StatusNotModified:
		return false
	}
	return res.Body != nil && res.Body != http.NoBody && res.ContentLength != 0
}

// errorHandler answers a failed exchange: the proxy's timeout is 504, any
// other failure (refused, reset, a broken relay) 502.
func errorHandler(log *slog.Logger) func(http.ResponseWriter, *http.Request, error) {
	return func(_ http.ResponseWriter, r *http.Request, err error) {
		ex := exchangeFrom(r.Context())
		// The client's own mistakes and stalls are the client's. First: a
		// failed read of the connection cancels the request's context, so
		// a client that stopped sending its body looks as if it had left.
		if ex.body != nil && ex.clientAtFault(ex.body) {
			return
		}
		if ex.req.Context().Err() != nil {
			// The client went away first: there is nobody to answer, and
			// the log says so (499, nginx's "client closed request")
			// rather than blaming the upstream.
			ex.clientLeft()
			ex.closeUnanswered()
			return
		}
		// Only the proxy's own timeout is a timeout; a dial that gives up
		// on its own is a failure to reach the upstream.
		if context.Cause(r.Context()) == errUpstreamTimeout {
			ex.rec.UpstreamFailed = true
			ex.rec.UpstreamCause, ex.rec.UpstreamError = causeTimeout, "no answer within the proxy's timeout of "+ex.proxy.Timeout.String()
			ex.fail(apierr.UpstreamTimeout, "upstream timed out: no answer within the proxy's timeout of "+ex.proxy.Timeout.String())
			return
		}
		ex.rec.UpstreamFailed = true
		ex.rec.UpstreamCause, ex.rec.UpstreamError = upstreamCause(err), upstreamReason(err)
		ex.fail(apierr.UpstreamError, "the upstream could not be reached or broke off the exchange")
	}
}

// bufferPool recycles the buffers ReverseProxy copies bodies with. Pooling
// array pointers keeps Put free of allocations.
type bufferPool struct{}

const copyBufferSize = 32 << 10

var buffers = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

func (bufferPool) Get() []byte { return buffers.Get().(*[copyBufferSize]byte)[:] }

func (bufferPool) Put(b []byte) {
	if cap(b) >= copyBufferSize {
		buffers.Put((*[copyBufferSize]byte)(b[:copyBufferSize]))
	}
}
