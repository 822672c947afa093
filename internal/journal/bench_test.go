package journal

import (
	"net/http"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// BenchmarkKeep is what recording a mocked answer costs the request: one
// record made from the exchange's.
func BenchmarkKeep(b *testing.B) {
	req := http.Header{"User-Agent": {"wrk"}, "Accept": {"*/*"}, "X-Request-Id": {"abc"}, "Host": {"x"}}
	resp := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"28"}, "X-Request-Id": {"abc"}}
	rec := &telemetry.Exchange{RequestID: "abc", Proxy: "up", Mock: "item", Method: "GET", Path: "/mock/42", Status: 200, RequestHeader: req, ResponseHeader: resp,
		ResponseBody: &telemetry.Capture{Limit: 4096, Bytes: []byte(`{"id": 42, "name": "item 42"}`)}}
	s := &settings{bodies: 4096, secret: []string{"X-Doppel-Token", "Authorization", "Proxy-Authorization", "Cookie"}, responseSecret: []string{"Set-Cookie"}}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		keep(rec, now, s)
	}
}
