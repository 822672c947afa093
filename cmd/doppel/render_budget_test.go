package main

// The process-wide rendering budget through the real binary: a burst of
// large renders is partly refused with 503 RENDER_BUDGET_EXHAUSTED rather
// than held all at once, and the process's peak resident memory shows it.

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// renderBudgetProxies answer /big?n=N with N bytes rendered by the
// template, and /small with a few.
const renderBudgetProxies = `proxies:
  - name: render
    type: http
    url: http://127.0.0.1:1
    mocks:
      - name: big
        request: {method: GET, url: "^/big$", query: {n: .n}}
        response: {status: 200, body: '{{ "x" * n }}'}
      - name: small
        request: {method: GET, url: "^/small$"}
        response: {status: 200, json: '{"id": "{{ request_id }}"}'}
`

// TestRenderBudgetBoundsConcurrentRenders: 40 requests at once, each
// rendering 16,000,000 bytes (made by `*`, then written: 32 MB reserved a
// render), against a budget of 48 MiB, which one render fits whole. Some
// are answered 503 RENDER_BUDGET_EXHAUSTED with a log line saying why,
// the rest 200 with the whole body; the peak RSS stays far below the
// 40 × 16 MiB the renders would hold at once without the budget; requests
// after the burst are served.
//
// A render is refused at whichever step does not fit, so renders that
// collide can all be refused; such a burst (every answer a 503) is checked
// like any other, then the burst is sent again, up to five times in all.
func TestRenderBudgetBoundsConcurrentRenders(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	const (
		size     = 16_000_000
		requests = 40
		limit    = 320 << 20 // half of the 40 × 16 MiB = 640 MiB the renders alone would hold
	)
	cfg := serveConfig(t, t.TempDir(), 0, 0, renderBudgetProxies)
	p, addr := serveUp(t, cfg, map[string]string{"DOPPEL_RENDER_BUDGET": "48MiB"})
	pid := p.cmd.Process.Pid
	before := peakRSS(t, pid)

	var refused []string // request ids
	for burst := 1; burst <= 5; burst++ {
		ok, no := renderBurst(t, addr, requests, size)
		peak := peakRSS(t, pid)
		t.Logf("burst %d: %d answered, %d refused; peak RSS %.1f MiB at start, %.1f MiB since",
			burst, ok, len(no), float64(before)/(1<<20), float64(peak)/(1<<20))
		if peak >= limit {
			t.Fatalf("peak RSS %.1f MiB, want under %d MiB", float64(peak)/(1<<20), limit>>20)
		}
		refused = append(refused, no...)
		if ok > 0 && len(no) > 0 {
			break
		}
		if ok == requests || burst == 5 {
			t.Fatalf("%d answered and %d refused, want some of each", ok, len(no))
		}
	}
	id := refused[0]
	line := p.waitLine("why a render was refused", 5*time.Second, func(l string) bool {
		return lineField(l, "request_id") == id && lineField(l, "level") == "WARN"
	})
	if !strings.Contains(lineField(line, "error"), "rendering budget") || lineField(line, "mock") != "big" {
		t.Errorf("the log line of a refused render does not say why: %s", line)
	}
	for _, path := range []string{"/big?n=16000000", "/small"} {
		if r := mustGet(t, newClient(), "http://"+addr+path, nil); r.status != http.StatusOK || (path == "/big?n=16000000" && len(r.body) != size) {
			t.Errorf("GET %s after the burst: status %d, %d bytes: %.200s", path, r.status, len(r.body), r.body)
		}
	}
}

// renderBurst sends n requests for /big?n=size at once and counts those
// answered 200 with the whole body, and the ids of those refused with
// 503 RENDER_BUDGET_EXHAUSTED; any other answer fails the test.
func renderBurst(t *testing.T, addr string, n, size int) (ok int, refused []string) {
	t.Helper()
	type answer struct {
		status int
		code   string
		n      int
		id     string
		err    error
	}
	answers := make(chan answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			r, err := get(newClient(), "http://"+addr+"/big?n="+strconv.Itoa(size), nil)
			a := answer{status: r.status, n: len(r.body), id: r.header.Get("X-Request-Id"), err: err}
			if r.status != http.StatusOK {
				var env struct{ Code string }
				_ = json.Unmarshal(r.body, &env)
				a.code = env.Code
			}
			answers <- a
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("a request of the burst: %v", a.err)
		case a.status == http.StatusOK && a.n == size:
			ok++
		case a.status == http.StatusServiceUnavailable && a.code == "RENDER_BUDGET_EXHAUSTED":
			refused = append(refused, a.id)
		default:
			t.Errorf("a request of the burst: status %d, code %q, %d bytes", a.status, a.code, a.n)
		}
	}
	return ok, refused
}
