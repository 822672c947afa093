package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/session"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// The forwarding benchmarks drive each handler directly (no client-side
// HTTP parsing in the measurement) against one local upstream, with the
// same transport settings, so the difference is what Doppel's pipeline
// adds to a bare httputil.ReverseProxy: resolution, confinement, the fault
// rolls, the request id, the header work and the request log line.
//
//	go test ./internal/proxy -run '^$' -bench Forward -benchmem

func benchUpstream(b *testing.B) *httptest.Server {
	b.Helper()
	body := []byte(`{"ok":true}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func runForward(b *testing.B, h http.Handler, header ...string) {
	b.ReportAllocs()
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodGet, "http://doppel.test/items/42?page=2", nil)
			req.RemoteAddr = "127.0.0.1:50000"
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "req/s")
}

func BenchmarkForwardBareReverseProxy(b *testing.B) {
	up := benchUpstream(b)
	target, _ := url.Parse(up.URL + "/api/")
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: NewTransport(),
	}
	runForward(b, rp)
}

func BenchmarkForwardDoppel(b *testing.B) { benchForwardDoppel(b, false, false, false) }

// BenchmarkForwardDoppelJournal is BenchmarkForwardDoppel with the
// journal on, as by default: what recording costs.
func BenchmarkForwardDoppelJournal(b *testing.B) { benchForwardDoppel(b, true, false, false) }

// BenchmarkForwardDoppelSession is BenchmarkForwardDoppel with every
// request carrying the id of a live session over the proxy, whose overlay
// adds a mock that does not match: what being in a session costs.
func BenchmarkForwardDoppelSession(b *testing.B) { benchForwardDoppel(b, false, true, false) }

// BenchmarkForwardDoppelDefaults is BenchmarkForwardDoppel as the binary
// runs it: the journal on and an external address, so that every JSON
// answer is read for the upstream's address (rewrite_urls is on by
// default) and, naming none here, sent on as it came.
func BenchmarkForwardDoppelDefaults(b *testing.B) { benchForwardDoppel(b, true, false, true) }

func benchForwardDoppel(b *testing.B, journaled, inSession, external bool) {
	up := benchUpstream(b)
	doc, err := config.Load([]byte(oneProxy(up.URL+"/api/", "")))
	if err != nil {
		b.Fatal(err)
	}
	rt, _ := runtime.Compile(doc)
	logger := telemetry.NewLogger(io.Discard, "info", "json")
	defer logger.Flush()
	opts := Options{Log: logger}
	if journaled {
		opts.Journal = journal.New(doc)
	}
	if external {
		opts.External = ListenerExternal("http", "127.0.0.1:8080")
	}
	if !inSession {
		runForward(b, New(runtime.NewHolder(rt), opts))
		return
	}
	reg := session.New(rt, slog.New(slog.DiscardHandler))
	spec, err := config.ParseSession([]byte(`{"proxies": {"zeta": {"mocks": [{"name": "unused", "request": {"method": "GET", "url": "^/never$"}, "response": {"status": 204}}]}}}`), rt.Document)
	if err != nil {
		b.Fatal(err)
	}
	s, err := reg.Create(context.Background(), spec, nil)
	if err != nil {
		b.Fatal(err)
	}
	opts.Sessions = reg
	runForward(b, New(runtime.NewHolder(rt), opts), "X-Doppel-Session", string(s.ID))
}

// BenchmarkMock is the mock path end to end inside the handler: match,
// extract (a capture, a header, a query parameter), render a JSON template
// and a header template, and write the answer.
//
//	go test ./internal/proxy -run '^$' -bench Mock -benchmem
func BenchmarkMock(b *testing.B) { benchMock(b, false, "") }

// BenchmarkMockSessionLive is BenchmarkMock while a session is live over
// the proxy and the request carries no session header: what sessions
// cost the requests that have none (one header lookup).
func BenchmarkMockSessionLive(b *testing.B) { benchMock(b, false, "", withSession) }

// BenchmarkJournalMock is BenchmarkMock with the journal on.
func BenchmarkJournalMock(b *testing.B) { benchMock(b, true, "") }

// BenchmarkMockWhen is BenchmarkMock with a loss whose condition counts
// every request per X-User (one key) and never fires: what counting
// costs a request.
func BenchmarkMockWhen(b *testing.B) {
	benchMock(b, false, "    proxy: {loss: {percentage: 1.0, status: 503, when: {count: {after: 1000000000}, per: {header: X-User}}}}\n")
}

// withSession makes a session live over every proxy of doc.
func withSession(b *testing.B, opts *Options, rt *runtime.Runtime) {
	reg := session.New(rt, slog.New(slog.DiscardHandler))
	spec, err := config.ParseSession([]byte(`{"proxies": {"zeta": {"loss": {"percentage": 1, "status": 503}}}}`), rt.Document)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := reg.Create(context.Background(), spec, nil); err != nil {
		b.Fatal(err)
	}
	opts.Sessions = reg
}

func benchMock(b *testing.B, journaled bool, mockProxy string, with ...func(*testing.B, *Options, *runtime.Runtime)) {
	doc, err := config.Load([]byte(oneProxy("http://127.0.0.1:1", `mocks:
  - name: other
    request: {method: POST, url: "^/orders$"}
    response: {status: 201, body: created}
  - name: product
    request:
      method: GET
      url: "^/products/(?P<id>[0-9]+)$"
      headers: {who: X-User}
      query: {page: .page}
    response:
      status: 200
      json: '{"id": {{ id }}, "name": "Product {{ id }}", "page": "{{ page | default("1") }}", "who": "{{ who }}"}'
      headers: {X-Served-By: "mock {{ mock_name }}"}
`+mockProxy)))
	if err != nil {
		b.Fatal(err)
	}
	rt, _ := runtime.Compile(doc)
	logger := telemetry.NewLogger(io.Discard, "info", "json")
	defer logger.Flush()
	opts := Options{Log: logger}
	if journaled {
		opts.Journal = journal.New(doc)
	}
	for _, w := range with {
		w(b, &opts, rt)
	}
	h := New(runtime.NewHolder(rt), opts)
	// One parsed request is served over and over: what is measured is the
	// handler, not the parsing of a request line.
	req := httptest.NewRequest(http.MethodGet, "http://doppel.test/products/42?page=2", nil)
	req.Header.Set("X-User", "ann")
	w := &discardWriter{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.header)
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// discardWriter is the cheapest ResponseWriter: it keeps the status only.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
