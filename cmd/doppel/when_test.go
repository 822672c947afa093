package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// whenProxies are proxies chosen with X-Case, each with one condition on
// its loss, and the same on the loss of its mock /m, which answers "ok";
// what the proxy forwards finds no upstream (502).
func whenProxies(cases map[string]string) string {
	var b strings.Builder
	b.WriteString("proxies:\n")
	for _, name := range []string{"first", "every", "after", "window", "mobile", "other"} {
		when, ok := cases[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, `  - name: %s
    type: http
    url: http://127.0.0.1:9/
    resolve: {type: header, header: X-Case}
    loss: {percentage: 1.0, status: 503, when: %s}
    mocks:
      - name: ok
        request: {method: GET, url: "^/m$"}
        response: {status: 200, body: ok}
        proxy: {loss: {percentage: 1.0, status: 503, when: %s}}
`, name, when, when)
	}
	return b.String()
}

// statuses sends n requests to url under the proxy of that case, with the headers
// given (name, value, ...), and lists their statuses.
func statuses(t *testing.T, url, which string, n int, header ...string) string {
	t.Helper()
	var out []string
	for range n {
		r := call(t, "GET", url, "", append([]string{"X-Case", which}, header...)...)
		out = append(out, fmt.Sprint(r.status))
	}
	return strings.Join(out, " ")
}

// TestWhenFailsTheFirstAttemptsThenPasses: the classic retry test through
// the binary, and every other condition, with the counters API.
func TestWhenFailsTheFirstAttemptsThenPasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, whenProxies(map[string]string{
		"first":  "{count: {first: 2}, per: {header: Idempotency-Key}}",
		"every":  "{count: {every: 3}}",
		"after":  "{count: {after: 10}}",
		"window": "{window: {from: 0, for: 1}}",
		"mobile": "{headers: {X-Client: '^mobile-'}, count: {first: 1}}",
		"other":  "{count: {first: 1}}",
	}))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	s := serveArgs(t, dir, nil, "serve", "--config", cfg)
	defer s.stop(t)

	m, x := s.proxy+"/m", s.proxy+"/x"
	// The mock's own loss: attempts 1 and 2 of each key fail, 3 passes; a
	// new key starts over.
	if got := statuses(t, m, "first", 3, "Idempotency-Key", "k1"); got != "503 503 200" {
		t.Errorf("first: 2 per key, k1: %s", got)
	}
	if got := statuses(t, m, "first", 3, "Idempotency-Key", "k2"); got != "503 503 200" {
		t.Errorf("a new key: %s", got)
	}
	// The proxy's own, for what it forwards, counted apart from the
	// mock's.
	if got := statuses(t, x, "first", 3, "Idempotency-Key", "k1"); got != "503 503 502" {
		t.Errorf("the proxy's first: 2, k1: %s", got)
	}
	if got := statuses(t, x, "every", 7); got != "502 502 503 502 502 503 502" {
		t.Errorf("every: 3: %s", got)
	}
	if got := statuses(t, m, "every", 3); got != "200 200 503" {
		t.Errorf("every: 3 on the mock: %s", got)
	}
	if got := statuses(t, x, "after", 12); got != strings.Repeat("502 ", 10)+"503 503" {
		t.Errorf("after: 10: %s", got)
	}
	if got := statuses(t, m, "window", 2); got != "503 503" {
		t.Errorf("inside the window: %s", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := statuses(t, m, "window", 1); got != "200" {
		t.Errorf("after the window: %s", got)
	}
	// Only the requests the headers admit are counted.
	if got := statuses(t, m, "mobile", 2, "X-Client", "desktop-1"); got != "200 200" {
		t.Errorf("a desktop client: %s", got)
	}
	if got := statuses(t, m, "mobile", 2, "X-Client", "mobile-ios"); got != "503 200" {
		t.Errorf("a mobile client after two desktop ones: %s", got)
	}

	var list struct {
		Counters []struct {
			Fault     string  `json:"fault"`
			Mock      *string `json:"mock"`
			Key       string  `json:"key"`
			Count     int     `json:"count"`
			FirstSeen string  `json:"first_seen"`
		} `json:"counters"`
	}
	res := mustGet(t, newClient(), s.admin+"/api/v1/proxies/first/counters", nil)
	if err := json.Unmarshal(res.body, &list); err != nil || res.status != 200 {
		t.Fatalf("counters: %d %s", res.status, res.body)
	}
	keys := map[string]int{}
	for _, c := range list.Counters {
		if _, err := time.Parse(time.RFC3339Nano, c.FirstSeen); err != nil {
			t.Errorf("first_seen %q", c.FirstSeen)
		}
		scope := "proxy"
		if c.Mock != nil {
			scope = *c.Mock
		}
		keys[c.Fault+" "+scope+" "+c.Key] = c.Count
	}
	if keys["loss ok k1"] != 3 || keys["loss ok k2"] != 3 || keys["loss proxy k1"] != 3 || len(keys) != 3 {
		t.Errorf("counters of first: %s", res.body)
	}

	// DELETE resets: k1 fails twice again.
	if r := call(t, "DELETE", s.admin+"/api/v1/proxies/first/counters", ""); r.status != 204 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	if got := statuses(t, m, "first", 3, "Idempotency-Key", "k1"); got != "503 503 200" {
		t.Errorf("k1 after a reset: %s", got)
	}
	if r := call(t, "DELETE", s.admin+"/api/v1/proxies/nobody/counters", ""); r.status != 404 {
		t.Errorf("an unknown proxy's counters: %d", r.status)
	}

	// An edit of another proxy keeps them; an edit of this one restarts
	// them.
	edit := func(name, mutate string) {
		t.Helper()
		res := mustGet(t, newClient(), s.admin+"/api/v1/proxies/"+name, nil)
		var doc struct {
			Revision string         `json:"revision"`
			Proxy    map[string]any `json:"proxy"`
		}
		if err := json.Unmarshal(res.body, &doc); err != nil {
			t.Fatal(err)
		}
		doc.Proxy["timeout"] = map[string]float64{"a": 7, "b": 8}[mutate]
		body, _ := json.Marshal(doc)
		if r := call(t, "PUT", s.admin+"/api/v1/proxies/"+name, string(body)); r.status != 200 {
			t.Fatalf("update %s: %d %s", name, r.status, r.body)
		}
	}
	edit("other", "a")
	if got := statuses(t, m, "first", 1, "Idempotency-Key", "k1"); got != "200" {
		t.Errorf("k1 after another proxy changed: %s (its count restarted)", got)
	}
	edit("first", "b")
	if got := statuses(t, m, "first", 3, "Idempotency-Key", "k1"); got != "503 503 200" {
		t.Errorf("k1 after its proxy changed: %s", got)
	}
}

// TestCountsHoldUnderConcurrency: 32 clients over 50 keys, each key sent
// 5 times: every key meets exactly first faults.
func TestCountsHoldUnderConcurrency(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, whenProxies(map[string]string{"first": "{count: {first: 2}, per: {header: Idempotency-Key}}"}))
	_, addr := serveUp(t, cfg, nil)
	var mu sync.Mutex
	failed := map[string]int{}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for key := range work {
				r := call(t, "GET", "http://"+addr+"/m", "", "X-Case", "first", "Idempotency-Key", key)
				if r.status == 503 {
					mu.Lock()
					failed[key]++
					mu.Unlock()
				}
			}
		})
	}
	for round := range 5 {
		for k := range 50 {
			work <- fmt.Sprintf("key-%d", (k+round*7)%50)
		}
	}
	close(work)
	wg.Wait()
	for k := range 50 {
		if n := failed[fmt.Sprintf("key-%d", k)]; n != 2 {
			t.Errorf("key-%d failed %d times, want 2", k, n)
		}
	}
}
