package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
)

// journalPage is a GET /api/v1/requests answer, as read by these tests.
type journalPage struct {
	Requests []struct {
		ID              string              `json:"id"`
		Path            string              `json:"path"`
		Headers         map[string][]string `json:"headers"`
		ResponseHeaders map[string][]string `json:"response_headers"`
		HeadersCut      bool                `json:"headers_cut"`
		Body            string              `json:"body"`
	} `json:"requests"`
	Dropped *uint64 `json:"dropped"`
	More    *int    `json:"more"`
}

// listed reads the journal through the admin API until ready says the
// page is what the requests sent should have left (an entry is recorded
// as its answer ends, which the client may see first), or 10 s passed.
func listed(t *testing.T, admin, query string, ready func(journalPage) bool) journalPage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := mustGet(t, newClient(), admin+"/api/v1/requests"+query, nil)
		var page journalPage
		if err := json.Unmarshal(r.body, &page); r.status != http.StatusOK || err != nil {
			t.Fatalf("GET /api/v1/requests%s: %d %v %.300s", query, r.status, err, r.body)
		}
		if ready(page) || time.Now().After(deadline) {
			return page
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publicAdmin makes cfg's admin API readable without a token.
func publicAdmin(t *testing.T, dir, cfg string) string {
	return writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
}

// TestJournalKeepsHeadersWithinTheirBound: a request padded with headers
// is kept within journal.headers (the small headers whole, the padding
// cut with …, headers_cut), verify matches what was kept, and recording
// leaves out an answer's header the journal cut, saying so.
func TestJournalKeepsHeadersWithinTheirBound(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 5000))
		w.Header().Set("X-Small", "kept")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true}`)
	})
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `journal: {headers: 1Ki}
proxies:
  - name: shop
    type: http
    url: `+up.URL+`
    mocks:
      - {name: pay, request: {method: POST, url: "^/pay$"}, response: {status: 200, body: "paid"}}
`)
	s := serveArgs(t, dir, nil, "serve", "--config", publicAdmin(t, dir, cfg))
	defer s.stop(t)

	pad := strings.Repeat("p", 100_000)
	for range 2 {
		if r := call(t, "POST", s.proxy+"/pay", "", "Idempotency-Key", "order-1", "X-Pad", pad); r.status != 200 {
			t.Fatalf("POST /pay: %d", r.status)
		}
	}
	if r := call(t, "GET", s.proxy+"/data", ""); r.status != 200 || r.header.Get("X-Big") == "" {
		t.Fatalf("GET /data: %d %v", r.status, r.header)
	}
	page := listed(t, s.admin, "", func(p journalPage) bool { return len(p.Requests) == 3 })
	if len(page.Requests) != 3 {
		t.Fatalf("%d entries, want 3", len(page.Requests))
	}
	for _, e := range page.Requests[:2] {
		kept := 0
		for name, vs := range e.Headers {
			for _, v := range vs {
				kept += len(name) + len(v)
			}
		}
		x := e.Headers["X-Pad"]
		if !e.HeadersCut || kept > 1024 || e.Headers["Idempotency-Key"][0] != "order-1" ||
			len(x) != 1 || !strings.HasSuffix(x[0], "…") || !strings.HasPrefix(pad, strings.TrimSuffix(x[0], "…")) {
			t.Errorf("%s: cut %v, %d bytes kept, X-Pad %.40q…, Idempotency-Key %q", e.Path, e.HeadersCut, kept, x, e.Headers["Idempotency-Key"])
		}
	}
	if data := page.Requests[2]; !data.HeadersCut || data.ResponseHeaders["X-Small"][0] != "kept" || !strings.HasSuffix(data.ResponseHeaders["X-Big"][0], "…") {
		t.Errorf("/data: cut %v, %v", data.HeadersCut, data.ResponseHeaders)
	}

	// Verify reads what was kept: the key held, the padding did not.
	verify := func(body string) result {
		return doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--file", writeFile(t, t.TempDir(), "v.json", body)}})
	}
	if r := verify(`{"match": {"path": "^/pay$", "headers": {"Idempotency-Key": "^order-1$"}}, "count": {"min": 2, "max": 2}, "same_header": "Idempotency-Key"}`); r.code != wantOK {
		t.Errorf("verify on the key: %s", r)
	}
	if r := verify(`{"match": {"path": "^/pay$", "headers": {"X-Pad": "^p+$"}}, "count": {"min": 1}}`); r.code != wantRejected || !strings.Contains(r.stdout, "0 requests matched") {
		t.Errorf("verify on the padding as sent: %s", r)
	}

	// Recording: the cut header is left out of the mock, and the output
	// says so; the whole one is kept.
	r := doppel(t, invocation{args: []string{"mocks", "record", "--admin", s.admin, "--proxy", "shop", "--match", "^/data$"}})
	if r.code != wantOK || !strings.Contains(r.stdout, "X-Small: kept") || strings.Contains(r.stdout, "bbbb") ||
		!strings.Contains(r.stdout, "# the journal cut headers of the answers at journal.headers = 1024 bytes") ||
		!strings.Contains(r.stdout, "rec-get-data leaves out X-Big") {
		t.Errorf("mocks record:\n%s", r)
	}
}

// TestJournalKeepsWithinItsBytes: journal.bytes bounds the ring beside
// size: the newest entries that fit are kept, the others counted in
// dropped.
func TestJournalKeepsWithinItsBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `journal: {bodies: 64Ki, bytes: 1Mi}
proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - {name: echo, request: {method: POST, url: "^/echo$", body: {v: .v}}, response: {status: 200, body: "ok"}}
`)
	s := serveArgs(t, dir, nil, "serve", "--config", publicAdmin(t, dir, cfg))
	defer s.stop(t)
	body := `{"v": "` + strings.Repeat("x", 60_000) + `"}`
	const sent = 40
	for i := range sent {
		if r := call(t, "POST", s.proxy+"/echo", body, "X-Request-ID", fmt.Sprintf("r-%02d", i)); r.status != 200 {
			t.Fatalf("POST /echo: %d", r.status)
		}
	}
	last := fmt.Sprintf("r-%02d", sent-1)
	page := listed(t, s.admin, "", func(p journalPage) bool {
		return len(p.Requests) > 0 && p.Requests[len(p.Requests)-1].ID == last && uint64(len(p.Requests))+*p.Dropped == sent
	})
	n := len(page.Requests)
	kept := 0
	for _, e := range page.Requests {
		kept += len(e.Body)
	}
	if n < 10 || n >= sent || kept > 1<<20 || page.Requests[n-1].ID != last || *page.Dropped != uint64(sent-n) {
		t.Errorf("%d entries of %d kept (%d bytes of bodies), the newest %s, %d dropped; want the newest within 1 MiB, the rest dropped",
			n, sent, kept, page.Requests[n-1].ID, *page.Dropped)
	}
}

// TestJournalAnswersAreBounded: a list holds the newest 1,000 entries
// unless limit says (at most 10,000) and counts the others in more; a
// refuted verify carries the newest 100 matched and counts the others in
// requests_omitted; the CLI says both.
func TestJournalAnswersAreBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - {name: nn, request: {method: GET, url: "^/n$"}, response: {status: 200, body: "n"}}
`)
	s := serveArgs(t, dir, nil, "serve", "--config", publicAdmin(t, dir, cfg))
	defer s.stop(t)
	const sent = 1100
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for i := range sent {
		req, _ := http.NewRequest("GET", s.proxy+"/n", nil)
		req.Header.Set("X-Request-ID", fmt.Sprintf("r-%04d", i))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	page := listed(t, s.admin, "?limit=10000", func(p journalPage) bool { return len(p.Requests) == sent })
	if len(page.Requests) != sent || page.More == nil || *page.More != 0 {
		t.Fatalf("limit=10000: %d entries, more %v; want %d and 0", len(page.Requests), page.More, sent)
	}
	page = listed(t, s.admin, "", func(journalPage) bool { return true })
	if len(page.Requests) != 1000 || page.More == nil || *page.More != 100 || page.Requests[0].ID != "r-0100" || page.Requests[999].ID != "r-1099" {
		t.Errorf("the default: %d entries (%s..), more %v; want the newest 1000 and more 100", len(page.Requests), page.Requests[0].ID, page.More)
	}
	if r := mustGet(t, newClient(), s.admin+"/api/v1/requests?limit=10001", nil); r.status != 400 || !strings.Contains(string(r.body), "limit: ") {
		t.Errorf("limit=10001: %d %s", r.status, r.body)
	}
	list := doppel(t, invocation{args: []string{"requests", "list", "--admin", s.admin, "--limit", "10"}})
	if list.code != wantOK || !strings.Contains(list.stdout, "(1090 older requests matched too: --limit shows up to 10000)") {
		t.Errorf("requests list --limit 10:\n%s", list)
	}

	v := writeFile(t, t.TempDir(), "v.json", `{"match": {"path": "^/n$"}, "count": {"max": 10}}`)
	r := call(t, "POST", s.admin+"/api/v1/requests/verify", readFile(t, v))
	var failed struct {
		Code     string `json:"code"`
		Matched  int    `json:"matched"`
		Omitted  *int   `json:"requests_omitted"`
		Requests []struct {
			ID string `json:"id"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(r.body, &failed); err != nil || r.status != 409 || failed.Code != "VERIFICATION_FAILED" || failed.Matched != sent ||
		len(failed.Requests) != 100 || failed.Omitted == nil || *failed.Omitted != sent-100 || failed.Requests[0].ID != "r-1000" {
		t.Errorf("a refuted verify: %d %v %+v", r.status, err, failed)
	}
	table := doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--file", v}})
	if table.code != wantRejected || !strings.Contains(table.stdout, "(the newest 100 shown; 1000 older requests matched too)") {
		t.Errorf("requests verify:\n%s", table)
	}
}

// hugeHeaders sends n requests carrying 900 KB of headers each to a
// Doppel on the default configuration, 4 at once, and returns its
// resident memory then, with what it was before.
func hugeHeaders(tb testing.TB, n int) (rss, before int64) {
	tb.Helper()
	dir := tb.TempDir()
	cfg := serveConfig(tb, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - {name: nn, request: {method: GET, url: "^/n$"}, response: {status: 200, body: "n"}}
`)
	p, addr := serveUp(tb, cfg, nil)
	pid := p.cmd.Process.Pid
	before = procmem.MustResident(tb, pid)
	pads := make([]string, 9)
	for i := range pads {
		pads[i] = strings.Repeat(string(rune('a'+i)), 100_000)
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				req, _ := http.NewRequest("GET", "http://"+addr+"/n", nil)
				for j, pad := range pads {
					req.Header.Set(fmt.Sprintf("X-Pad-%d", j), pad)
				}
				res, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", res.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatalf("a request with 900 KB of headers: %v\n%s", err, p)
	}
	return procmem.MustResident(tb, pid), before
}

// TestHugeHeadersLeaveTheJournalSmall: 600 requests carrying 900 KB of
// headers each leave Doppel, on the default configuration, under
// 300 MiB of resident memory (BenchmarkHugeHeaders reports the figure).
func TestHugeHeadersLeaveTheJournalSmall(t *testing.T) {
	t.Parallel()
	rss, before := hugeHeaders(t, 600)
	t.Logf("RSS %.1f MiB after 600 requests of 900 KB of headers (from %.1f)", float64(rss)/(1<<20), float64(before)/(1<<20))
	if rss >= 300<<20 {
		t.Errorf("RSS %.1f MiB after 600 requests of 900 KB of headers, want under 300 MiB", float64(rss)/(1<<20))
	}
}

// BenchmarkHugeHeaders: go test ./cmd/doppel -run '^$' -bench HugeHeaders
// -benchtime 1x reports Doppel's resident memory after 600 requests
// carrying 900 KB of headers each.
func BenchmarkHugeHeaders(b *testing.B) {
	for b.Loop() {
		rss, before := hugeHeaders(b, 600)
		b.ReportMetric(float64(rss)/(1<<20), "MiB-RSS")
		b.ReportMetric(float64(before)/(1<<20), "MiB-RSS-before")
	}
}

// fullJournalReads fills a Doppel's journal on the default configuration
// (its 64 MiB budget) and reads it whole 20 times at once (limit=10000),
// and returns its peak resident memory before the reads and after.
func fullJournalReads(tb testing.TB) (peak, before int64, answer int64) {
	tb.Helper()
	dir := tb.TempDir()
	cfg := serveConfig(tb, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - {name: nn, request: {method: GET, url: "^/n$"}, response: {status: 200, body: "`+strings.Repeat("r", 4096)+`"}}
`)
	cfg = writeFile(tb, dir, "main.yaml", strings.Replace(readFile(tb, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(tb, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := "http://" + adminAddrOf(tb, p)
	pid := p.cmd.Process.Pid
	pad := strings.Repeat("h", 16<<10)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}
	get := func(url string, header ...string) int64 {
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			tb.Fatalf("GET %s: %v", url, err)
		}
		defer res.Body.Close()
		n, err := io.Copy(io.Discard, res.Body)
		if err != nil || res.StatusCode != 200 {
			tb.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
		}
		return n
	}
	// 3,500 entries of about 20 KiB: more than the budget holds.
	for range 3500 {
		get("http://"+addr+"/n", "X-Pad", pad)
	}
	before = procmem.MustPeak(tb, pid)
	var wg sync.WaitGroup
	sizes := make([]int64, 20)
	for i := range sizes {
		wg.Go(func() { sizes[i] = get(admin + "/api/v1/requests?limit=10000") })
	}
	wg.Wait()
	return procmem.MustPeak(tb, pid), before, sizes[0]
}

// TestConcurrentReadsOfAFullJournalStream: 20 reads at once of a full
// journal, each answer about 64 MiB of JSON, keep Doppel's peak resident
// memory under 400 MiB: each is encoded as it is written
// (BenchmarkFullJournalReads reports the figure).
func TestConcurrentReadsOfAFullJournalStream(t *testing.T) {
	t.Parallel()
	peak, before, answer := fullJournalReads(t)
	t.Logf("peak RSS %.1f MiB after 20 reads of %.1f MiB at once (%.1f MiB before)", float64(peak)/(1<<20), float64(answer)/(1<<20), float64(before)/(1<<20))
	if answer < 48<<20 {
		t.Errorf("an answer of %.1f MiB: the journal is not full", float64(answer)/(1<<20))
	}
	if peak >= 400<<20 {
		t.Errorf("peak RSS %.1f MiB, want under 400 MiB", float64(peak)/(1<<20))
	}
}

// BenchmarkFullJournalReads: go test ./cmd/doppel -run '^$' -bench
// FullJournalReads -benchtime 1x reports Doppel's peak resident memory
// over 20 reads at once of a full journal.
func BenchmarkFullJournalReads(b *testing.B) {
	for b.Loop() {
		peak, before, answer := fullJournalReads(b)
		b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-RSS")
		b.ReportMetric(float64(before)/(1<<20), "MiB-peak-RSS-before")
		b.ReportMetric(float64(answer)/(1<<20), "MiB/answer")
	}
}
