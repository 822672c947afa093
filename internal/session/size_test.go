package session

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
)

func bigOverlay(id string, size int) string {
	return `{"id": "` + id + `", "proxies": {"shop": {"mocks": [{"name": "big", "request": {"method": "GET", "url": "^/big$"}, "response": {"status": 200, "body": "` +
		strings.Repeat("x", size) + `"}}]}}}`
}

// TestLiveOverlaysAreBoundedInBytes: the sessions' overlays together stop
// at MaxLiveBytes, a replacement counts instead of its old self, and an
// ended one makes room.
func TestLiveOverlaysAreBoundedInBytes(t *testing.T) {
	r, _ := registry(t, doc)
	ctx := context.Background()
	n := 0
	for ; n < 1000; n++ {
		body := bigOverlay(fmt.Sprintf("s%d", n), 250_000)
		if _, err := r.Create(ctx, spec(t, r, body), []byte(body)); err != nil {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatal(err)
			}
			break
		}
	}
	if want := MaxLiveBytes / 250_100; n < want-2 || n > want+2 {
		t.Fatalf("%d sessions fit; about %d should", n, want)
	}
	// Replacing one with one of the same size fits: it is not counted twice.
	s, _ := r.Get("s0")
	body := bigOverlay("s0", 250_000)
	if _, err := r.Replace(ctx, "s0", s.Revision, spec(t, r, body), []byte(body)); err != nil {
		t.Errorf("replacing a session by one its size: %v", err)
	}
	if err := r.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	body = bigOverlay("again", 250_000)
	if _, err := r.Create(ctx, spec(t, r, body), []byte(body)); err != nil {
		t.Errorf("after ending one: %v", err)
	}
}

// BenchmarkLiveSessionBytes reports what a live session of a 250 KB
// overlay holds in the heap per byte of its body.
func BenchmarkLiveSessionBytes(b *testing.B) {
	t := &testing.T{}
	r, _ := registry(t, doc)
	ctx := context.Background()
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	const live = 40
	for i := range live {
		body := bigOverlay(fmt.Sprintf("s%d", i), 250_000)
		if _, err := r.Create(ctx, spec(t, r, body), []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(live*250_000), "heap-bytes/body-byte")
	if len(r.List()) != live {
		b.Fatal("not live")
	}
	for range b.N {
	}
}
