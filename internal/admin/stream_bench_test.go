package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/proxy"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// BenchmarkProxyWithSubscribers is 400 mocked requests through the proxy
// handler, journal on, with no stream open and with 2,000 (past the
// bound of 256, to show the cost does not grow with them): each follows
// the journal as the stream handler does, into a buffered writer that
// discards. One op is the 400 requests; compare the ns/op.
//
//	go test ./internal/admin -run '^$' -bench ProxyWithSubscribers
func BenchmarkProxyWithSubscribers(b *testing.B) {
	for _, n := range []int{0, 2000} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			doc, err := config.Load([]byte(`server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: http://127.0.0.1:1/
    mocks:
      - name: product
        request: {method: GET, url: "^/products/"}
        response: {status: 200, json: '{"id": 42}'}
`))
			if err != nil {
				b.Fatal(err)
			}
			rt, _ := runtime.Compile(doc)
			logger := telemetry.NewLogger(io.Discard, "info", "json")
			defer logger.Flush()
			j := journal.New(doc)
			h := proxy.New(runtime.NewHolder(rt), proxy.Options{Log: logger, Journal: j})
			ctx, stop := context.WithCancel(context.Background())
			turns := newStreams().turns
			var following sync.WaitGroup
			for range n {
				sub := j.Subscribe(func(e *journal.Entry) bool { return e.Proxy == "zeta" })
				following.Go(func() {
					defer j.Unsubscribe(sub)
					w := bufio.NewWriter(io.Discard)
					st := &stream{w: w, flush: w.Flush, sub: sub, turns: turns}
					st.follow(ctx)
				})
			}
			req := httptest.NewRequest(http.MethodGet, "http://doppel.test/products/42", nil)
			for b.Loop() {
				for range 400 {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d", w.Code)
					}
				}
			}
			stop()
			following.Wait()
		})
	}
}
