package journal

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// BenchmarkKeep is what recording a mocked answer costs the request: one
// record made from the exchange's.
func BenchmarkKeep(b *testing.B) {
	req := http.Header{"User-Agent": {"wrk"}, "Accept": {"*/*"}, "X-Request-Id": {"abc"}, "Host": {"x"}}
	resp := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"28"}, "X-Request-Id": {"abc"}}
	rec := &telemetry.Exchange{RequestID: "abc", Proxy: "up", Mock: "item", Method: "GET", Path: "/mock/42", Status: 200, RequestHeader: req, ResponseHeader: resp,
		ResponseBody: &telemetry.Capture{Limit: 4096, Bytes: []byte(`{"id": 42, "name": "item 42"}`)}}
	s := &settings{bodies: 4096, headers: 16 << 10, secret: []string{"X-Doppel-Token", "Authorization", "Proxy-Authorization", "Cookie"}, responseSecret: []string{"Set-Cookie"}}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		keep(rec, now, s)
	}
}

// BenchmarkKeepHugeHeaders is what a request carrying 900 KB of headers
// costs to keep under the default journal.headers, and what the entry
// holds of it (KiB-kept).
func BenchmarkKeepHugeHeaders(b *testing.B) {
	req := http.Header{"User-Agent": {"wrk"}, "Accept": {"*/*"}}
	for i := range 9 {
		req.Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 100_000))
	}
	rec := &telemetry.Exchange{RequestID: "abc", Proxy: "up", Mock: "item", Method: "GET", Path: "/mock/42", Status: 200, RequestHeader: req}
	s := &settings{bodies: 4096, headers: int(config.DefaultJournalHeaders), secret: []string{"Authorization"}}
	now := time.Now()
	b.ReportAllocs()
	var k *kept
	for b.Loop() {
		k = keep(rec, now, s)
	}
	b.ReportMetric(float64(k.size)/1024, "KiB-kept")
}
