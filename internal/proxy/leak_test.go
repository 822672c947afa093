package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAbortedStreamsLeakNothing: SPEC §5.4. 1,000 clients each read a
// little of a slow streaming answer and hang up. Afterwards the number of
// goroutines is back near its baseline and the upstream sees no connection
// still open: Doppel released the upstream exchange of every one.
func TestAbortedStreamsLeakNothing(t *testing.T) {
	const requests, parallel = 1000, 50
	var open atomic.Int64 // upstream connections not yet closed
	var started atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		chunk := strings.Repeat("x", 512)
		for {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	up.Config.ConnState = func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	up.Start()
	defer up.Close()
	d := start(t, oneProxy(up.URL, "timeout: 600\nrewrite_urls: false"), nil)

	abort := func() error {
		c, err := net.DialTimeout("tcp", d.Listener.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		buf := make([]byte, 256)
		n, err := io.ReadAtLeast(c, buf, 200) // status line, headers, a little body
		if err != nil {
			return fmt.Errorf("after %d bytes: %w", n, err)
		}
		if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
			return fmt.Errorf("answer %q", buf[:n])
		}
		return nil // the deferred Close hangs up mid-stream
	}

	// Warm up: one aborted request so that lazily started goroutines exist,
	// then take the baseline once things settled.
	if err := abort(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return open.Load() == 0 })
	time.Sleep(200 * time.Millisecond)
	base := goruntime.NumGoroutine()

	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, parallel)
	for range requests {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := abort(); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed before being aborted, the first: %v", n, requests, firstErr.Load())
	}
	if n := started.Load(); n < requests {
		t.Fatalf("only %d requests reached the upstream", n)
	}

	const margin = 5
	var g int
	ok := poll(5*time.Second, func() bool {
		g = goruntime.NumGoroutine()
		return g <= base+margin && open.Load() == 0
	})
	if !ok {
		buf := make([]byte, 1<<20)
		buf = buf[:goruntime.Stack(buf, true)]
		t.Fatalf("after %d aborted requests: %d goroutines (baseline %d), %d upstream connections still open\n%s",
			requests, g, base, open.Load(), buf)
	}
	t.Logf("goroutines: baseline %d, after %d", base, g)
}

// poll calls cond every 20 ms until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatal("the condition did not hold in time")
	}
}
