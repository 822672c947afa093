package journal

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// TestMemoryOfAFullJournal measures what docs/journal.md states: 10,000
// entries, each with 4 KiB of request and of response body and ordinary
// headers, under the default journal.bytes; and the same with a budget
// that holds them all. Run with -v to see the figures.
func TestMemoryOfAFullJournal(t *testing.T) {
	for _, c := range []struct {
		journal string
		bound   float64 // MiB
	}{{"", 70}, {"journal: {bytes: 1Gi}\n", 100}} {
		memoryOfAFullJournal(t, c.journal, c.bound)
	}
}

func memoryOfAFullJournal(t *testing.T, journal string, bound float64) {
	if testing.Short() {
		t.Skip("allocates about 100 MB")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	j := New(doc(t, journal))
	body := bytes.Repeat([]byte("x"), 4096)
	h := http.Header{"Accept": {"application/json"}, "User-Agent": {"client/1.0"}, "Content-Type": {"application/json"},
		"Idempotency-Key": {"order-123456"}, "Authorization": {"Bearer abc"}}
	rh := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"7ad35156-30f7-4df7-a1fc-58c812ed1868"}}
	for range 10000 {
		rec := &telemetry.Exchange{RequestID: "7ad35156-30f7-4df7-a1fc-58c812ed1868", Proxy: "payments", Method: "POST", Path: "/pay",
			Query: "a=1", Status: 201, RequestHeader: h, ResponseHeader: rh, Client: "127.0.0.1",
			RequestBody:  &telemetry.Capture{Limit: 4096, Bytes: bytes.Clone(body)},
			ResponseBody: &telemetry.Capture{Limit: 4096, Bytes: bytes.Clone(body)}}
		j.Active().Record(rec, time.Now())
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	mb := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	t.Logf("%q: 10,000 entries with 4 KiB bodies each way: %d kept, %.1f MiB of heap", journal, len(j.Entries()), mb)
	if mb > bound {
		t.Errorf("%.1f MiB: more than the bound documented", mb)
	}
	runtime.KeepAlive(j)
}
