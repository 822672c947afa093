package main

// The process-wide rendering budget through the real binary: a burst of
// large renders is partly refused with 503 RENDER_BUDGET_EXHAUSTED rather
// than held all at once, and the process's peak resident memory shows it.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
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
	procmem.Need(t)
	const (
		size     = 16_000_000
		requests = 40
		limit    = 320 << 20 // half of the 40 × 16 MiB = 640 MiB the renders alone would hold
	)
	cfg := serveConfig(t, t.TempDir(), 0, 0, renderBudgetProxies)
	p, addr := serveUp(t, cfg, map[string]string{"DOPPEL_RENDER_BUDGET": "48MiB"})
	pid := p.cmd.Process.Pid
	before := procmem.MustPeak(t, pid)

	var refused []string // request ids
	for burst := 1; burst <= 5; burst++ {
		ok, no := renderBurst(t, addr, requests, size)
		peak := procmem.MustPeak(t, pid)
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

// renderValueProxies turn a request's values into large values (groups of
// a query's characters, a list repeated) and numbers (a power).
const renderValueProxies = `proxies:
  - name: render
    type: http
    url: http://127.0.0.1:1
    mocks:
      - name: groups
        request: {method: GET, url: "^/groups$", query: {q: .q}}
        response: {status: 200, body: '{{ q | batch(1) | list | length }}'}
      - name: rows
        request: {method: GET, url: "^/rows$", query: {q: .q}}
        response: {status: 200, body: '{{ q | batch(10) | list | length }}'}
      - name: repeat
        request: {method: GET, url: "^/repeat$", query: {n: .n}}
        response: {status: 200, body: '{{ [1] * (n | int) }}'}
      - name: power
        request: {method: GET, url: "^/power$", query: {n: .n}}
        response: {status: 200, body: '{{ 2 ** (n | int) }}'}
`

// TestRenderValuesCountAgainstTheBudget: what a filter makes counts
// before it is made. Eight requests at once, each grouping the characters
// of a 900 KB query (one group each, and one group of ten each), are
// answered 500 TEMPLATE_RENDER_ERROR naming the bound they would pass,
// at once, and the process's peak RSS stays far below the gigabyte the
// groups would take; arithmetic that leaves the 64-bit integers is an
// error naming them, never a wrong number; small values render as
// Jinja2 renders them.
func TestRenderValuesCountAgainstTheBudget(t *testing.T) {
	t.Parallel()
	procmem.Need(t)
	const limit = 200 << 20
	cfg := serveConfig(t, t.TempDir(), 0, 0, renderValueProxies)
	p, addr := serveUp(t, cfg, nil)
	pid := p.cmd.Process.Pid
	before := procmem.MustPeak(t, pid)

	q := strings.Repeat("x", 900_000)
	type answer struct {
		path string
		r    response
		err  error
	}
	answers := make(chan answer, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		path := []string{"/groups", "/rows"}[i%2]
		wg.Go(func() {
			r, err := get(newClient(), "http://"+addr+path+"?q="+q, nil)
			answers <- answer{path, r, err}
		})
	}
	wg.Wait()
	close(answers)
	want := map[string]string{
		"/groups": "batch would make 900000 groups, over the bound of 100000",
		"/rows":   "would make or read more than 64 MiB of values, the bound for one answer",
	}
	for a := range answers {
		if a.err != nil {
			t.Fatalf("GET %s: %v", a.path, a.err)
		}
		var env struct{ Code, Message string }
		_ = json.Unmarshal(a.r.body, &env)
		if a.r.status != http.StatusInternalServerError || env.Code != "TEMPLATE_RENDER_ERROR" || !strings.Contains(env.Message, want[a.path]) {
			t.Errorf("GET %s with a 900 KB query: status %d: %.300s; want 500 TEMPLATE_RENDER_ERROR saying %q", a.path, a.r.status, a.r.body, want[a.path])
		}
	}
	peak := procmem.MustPeak(t, pid)
	t.Logf("peak RSS %.1f MiB at start, %.1f MiB after eight renders of 900 KB queries", float64(before)/(1<<20), float64(peak)/(1<<20))
	if peak >= limit {
		t.Errorf("peak RSS %.1f MiB, want under %d MiB", float64(peak)/(1<<20), limit>>20)
	}

	for path, want := range map[string]string{
		"/groups?q=abc":                      "3",
		"/rows?q=" + strings.Repeat("y", 95): "10",
		"/repeat?n=3":                        "[1, 1, 1]",
		"/power?n=62":                        "4611686018427387904",
	} {
		if r := mustGet(t, newClient(), "http://"+addr+path, nil); r.status != http.StatusOK || string(r.body) != want {
			t.Errorf("GET %s: status %d, %q; want 200 %q", path, r.status, r.body, want)
		}
	}
	for path, want := range map[string]string{
		"/repeat?n=100000000": "rendering bound",
		"/power?n=100000":     "`**` would give an integer beyond ±9223372036854775807",
		"/power?n=63":         "`**` would give an integer beyond ±9223372036854775807",
	} {
		r := mustGet(t, newClient(), "http://"+addr+path, nil)
		var env struct{ Code, Message string }
		_ = json.Unmarshal(r.body, &env)
		if r.status != http.StatusInternalServerError || env.Code != "TEMPLATE_RENDER_ERROR" || !strings.Contains(env.Message, want) {
			t.Errorf("GET %s: status %d: %.300s; want 500 TEMPLATE_RENDER_ERROR saying %q", path, r.status, r.body, want)
		}
	}
}
