package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const retriesToken = "retries-example-token-0123456789ab"

// retryingClient is the client a test of retries is about: at most four
// attempts, 100 ms after the first failure and twice as long after each
// next, or what Retry-After says; one Idempotency-Key per call. It
// returns the statuses it met.
func retryingClient(t *testing.T, method, url, key string) []int {
	t.Helper()
	var got []int
	wait := 100 * time.Millisecond
	for attempt := 1; attempt <= 4; attempt++ {
		header := []string{}
		if key != "" {
			header = []string{"Idempotency-Key", key}
		}
		r := call(t, method, url, "", header...)
		got = append(got, r.status)
		if r.status < 500 && r.status != http.StatusTooManyRequests {
			return got
		}
		if s, err := strconv.Atoi(r.header.Get("Retry-After")); err == nil {
			time.Sleep(time.Duration(s) * time.Second)
		} else {
			time.Sleep(wait)
			wait *= 2
		}
	}
	return got
}

// checkRetriesExample holds examples/retries.yaml (and docs/retries.md,
// which walks through it) to what they say.
func checkRetriesExample(t *testing.T, root string) {
	src := exampleSource(t, root, "retries.yaml")
	wantQuoted(t, src, "503 503 201")
	s := serveExample(t, root, "retries.yaml", nil)
	defer s.stop(t)
	verify := func(body string) result {
		t.Helper()
		return doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--token", retriesToken,
			"--file", writeFile(t, t.TempDir(), "v.json", body)}})
	}

	// The comments' loop: two failures, then the order.
	var codes []string
	for range 3 {
		codes = append(codes, fmt.Sprint(call(t, "POST", s.proxy+"/orders", "", "Idempotency-Key", "order-7").status))
		time.Sleep(200 * time.Millisecond)
	}
	if got := strings.Join(codes, " "); got != "503 503 201" {
		t.Errorf("the loop printed %s", got)
	}
	// The comments' verification, as written there.
	m := regexp.MustCompile(`(?s)echo '(\{"match".*?\})' \|`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("the comments give no verification")
	}
	body := regexp.MustCompile(`\n#\s*`).ReplaceAllString(m[1], " ")
	if r := verify(body); r.code != wantOK || !strings.HasPrefix(r.stdout, "verified: ") {
		t.Errorf("the comments' verification: %s", r)
	}

	// A retrying client: succeeds on its third attempt with one key...
	if got := retryingClient(t, "POST", s.proxy+"/orders", "order-8"); fmt.Sprint(got) != "[503 503 201]" {
		t.Errorf("orders: %v", got)
	}
	// ...gives up after four on what always fails...
	if got := retryingClient(t, "GET", s.proxy+"/inventory", ""); fmt.Sprint(got) != "[503 503 503 503]" {
		t.Errorf("inventory: %v", got)
	}
	if r := verify(`{"match": {"path": "^/inventory$"}, "count": {"min": 4, "max": 4}, "gaps_ms": {"min": 100}}`); r.code != wantOK {
		t.Errorf("gave up after 4: %s", r)
	}
	// ...and waits the second Retry-After asks for.
	if got := retryingClient(t, "GET", s.proxy+"/quota", ""); fmt.Sprint(got) != "[429 200]" {
		t.Errorf("quota: %v", got)
	}
	if r := verify(`{"match": {"path": "^/quota$"}, "count": {"min": 2, "max": 2}, "gaps_ms": {"min": 1000}}`); r.code != wantOK {
		t.Errorf("honoured Retry-After: %s", r)
	}
	// A client that does not wait is caught.
	call(t, "GET", s.proxy+"/quota", "")
	if r := verify(`{"match": {"path": "^/quota$"}, "gaps_ms": {"min": 1000}}`); r.code != wantRejected || !strings.Contains(r.stdout, "gaps_ms") {
		t.Errorf("an impatient retry passed: %s", r)
	}
	// Reset, as the comments say: order-7 fails twice again.
	if r := call(t, "DELETE", s.admin+"/api/v1/proxies/shop/counters", "", bearer(retriesToken)...); r.status != 204 {
		t.Errorf("reset: %d", r.status)
	}
	if r := call(t, "POST", s.proxy+"/orders", "", "Idempotency-Key", "order-7"); r.status != 503 {
		t.Errorf("order-7 after a reset: %d", r.status)
	}
}

// TestReplayAfterAnAbortAtResponse: the first attempt of each key reaches
// the backend and its answer is cut; a client that retries with its key
// gets the answer; the journal verifies the replay kept its key.
func TestReplayAfterAnAbortAtResponse(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, fmt.Sprintf(`proxies:
  - name: payments
    type: http
    url: %s/
    abort:
      percentage: 1.0
      at: response
      when: {count: {first: 1}, per: {header: Idempotency-Key}}
`, up.URL))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	s := serveArgs(t, dir, nil, "serve", "--config", cfg)
	defer s.stop(t)

	// A client that retries a POST whose connection broke, with its key.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var statuses []string
	for range 3 {
		req, _ := http.NewRequest("POST", s.proxy+"/pay", strings.NewReader(`{"amount": 5}`))
		req.Header.Set("Idempotency-Key", "pay-1")
		res, err := client.Do(req)
		if err != nil {
			statuses = append(statuses, "cut")
			continue
		}
		res.Body.Close()
		statuses = append(statuses, fmt.Sprint(res.StatusCode))
		break
	}
	if got := strings.Join(statuses, " "); got != "cut 201" {
		t.Errorf("the client met %s", got)
	}
	mu.Lock()
	if fmt.Sprint(keys) != "[pay-1 pay-1]" {
		t.Errorf("the backend received %v", keys)
	}
	mu.Unlock()
	r := doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--file", writeFile(t, t.TempDir(), "v.json",
		`{"match": {"proxy": "payments", "method": "POST", "path": "^/pay$"}, "count": {"min": 2, "max": 2}, "same_header": "Idempotency-Key"}`)}})
	if r.code != wantOK {
		t.Errorf("verify: %s", r)
	}
}
