package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const retryToken = "retry-example-token-0123456789abcdef"

// checkRetryExample: a real client with a retry policy (examples/retry)
// against examples/retry.yaml, which drops half of POST /pay; the journal
// then verifies, call by call, that it made at most 4 attempts at least
// 100 ms apart and kept its Idempotency-Key, and refuses a stricter claim.
func checkRetryExample(t *testing.T, root string) {
	s := serveExample(t, root, "retry.yaml", nil)
	defer s.stop(t)
	bin := filepath.Join(t.TempDir(), "retry")
	if out, err := exec.Command("go", "build", "-o", bin, repoPath(t, "examples/retry")).CombinedOutput(); err != nil {
		t.Fatalf("building examples/retry: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--url", s.proxy, "--calls", "6").CombinedOutput()
	lines := regexp.MustCompile(`(?m)^(order-\d+): (paid after (\d) attempts|gave up.*)$`).FindAllStringSubmatch(string(out), -1)
	if len(lines) != 6 {
		t.Fatalf("the client's output:\n%s", out)
	}
	retried := false
	for _, l := range lines {
		key := l[1]
		verify := fmt.Sprintf(`{"match": {"path": "^/pay$", "headers": {"Idempotency-Key": "^%s$"}}, "count": {"min": 1, "max": 4}, "gaps_ms": {"min": 100}, "same_header": "Idempotency-Key"}`, key)
		r := doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--token", retryToken, "--file", writeFile(t, t.TempDir(), "v.json", verify)}})
		if r.code != wantOK || !strings.HasPrefix(r.stdout, "verified: ") {
			t.Errorf("%s: %s", key, r)
		}
		if l[3] != "" && l[3] != "1" {
			retried = true
			// A claim the client does not meet is refused, naming it.
			strict := strings.Replace(verify, `"max": 4`, `"max": 1`, 1)
			r := doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--token", retryToken, "-o", "json", "--file", writeFile(t, t.TempDir(), "v.json", strict)}})
			if r.code != wantRejected || !strings.Contains(r.stdout, `"code":"VERIFICATION_FAILED"`) || !strings.Contains(r.stdout, "count: ") {
				t.Errorf("%s, at most 1 attempt: %s", key, r)
			}
		}
	}
	if !retried {
		t.Logf("no call needed a retry this time (one run in 64):\n%s", out)
	}
}

// TestJournalEndToEnd: the binary records what its proxy listener
// handled, secrets masked and bodies bounded; receipts on request; the CLI
// lists, follows and clears.
func TestJournalEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `journal: {size: 50, bodies: 8}
proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    receipts: on_request
    mocks:
      - {name: echo, request: {method: POST, url: "^/echo$", body: {v: .v}}, response: {status: 200, body: "got {{ v }} and more"}}
      - {name: hi, request: {method: GET, url: "^/hi$"}, response: {status: 200, body: "hi"}}
`)
	cfg = strings.Replace(readFile(t, cfg), "  port: ", "  public: true\n  port: ", 2)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(cfg, "  public: true\n  port: ", "  port: ", 1))
	s := serveArgs(t, dir, nil, "serve", "--config", cfg)
	defer s.stop(t)

	// tail follows from before the requests.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tail := exec.CommandContext(ctx, doppelBin, "requests", "tail", "--admin", s.admin, "-o", "json", "--path", "^/hi$")
	tail.Env = cleanEnv()
	stdout, _ := tail.StdoutPipe()
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = tail.Wait() }()
	time.Sleep(300 * time.Millisecond)

	r := call(t, "POST", s.proxy+"/echo?x=1", `{"v": "seven"}`, "Authorization", "Bearer mine", "Cookie", "c=1")
	if r.status != 200 || r.header.Get("X-Doppel-Fault") != "" {
		t.Fatalf("echo: %d %v", r.status, r.header)
	}
	r = call(t, "GET", s.proxy+"/hi", "", "X-Doppel-Receipt", "1")
	if got := r.header.Get("X-Doppel-Fault"); got != "replace=mock;loss=no;abort=no;latency=0ms" {
		t.Errorf("receipt on request: %q", got)
	}

	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line <- sc.Text()
			return
		}
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, `"path":"/hi"`) {
			t.Errorf("tail printed %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Error("tail printed nothing")
	}

	res := mustGet(t, newClient(), s.admin+"/api/v1/requests?path=^/echo$", nil)
	var list struct {
		Requests []struct {
			Mock          *string             `json:"mock"`
			Query         string              `json:"query"`
			Headers       map[string][]string `json:"headers"`
			Body          string              `json:"body"`
			BodyTruncated bool                `json:"body_truncated"`
			ResponseBody  string              `json:"response_body"`
			RespTruncated bool                `json:"response_body_truncated"`
			Client        string              `json:"client"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(res.body, &list); err != nil || len(list.Requests) != 1 {
		t.Fatalf("list: %v %s", err, res.body)
	}
	e := list.Requests[0]
	if *e.Mock != "echo" || e.Query != "x=1" || e.Client != "127.0.0.1" {
		t.Errorf("entry: %+v", e)
	}
	if e.Headers["Authorization"][0] != "***" || e.Headers["Cookie"][0] != "***" {
		t.Errorf("secrets kept: %v", e.Headers)
	}
	if e.Body != `{"v": "s` || !e.BodyTruncated || e.ResponseBody != "got seve" || !e.RespTruncated {
		t.Errorf("bodies past journal.bodies: %+v", e)
	}
	// tail --limit 1 begins with the newest kept request, then follows.
	replay := exec.CommandContext(ctx, doppelBin, "requests", "tail", "--admin", s.admin, "-o", "json", "--limit", "1")
	replay.Env = cleanEnv()
	replayOut, _ := replay.StdoutPipe()
	if err := replay.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replay.Process.Kill(); _ = replay.Wait() }()
	first, _ := bufio.NewReader(replayOut).ReadString('\n')
	if !strings.Contains(first, `"path":"/hi"`) {
		t.Errorf("tail --limit 1 began with %q", first)
	}
	table := doppel(t, invocation{args: []string{"requests", "list", "--admin", s.admin}})
	if table.code != wantOK || !strings.Contains(table.stdout, "/echo?x=1") || !strings.Contains(table.stdout, "METHOD") {
		t.Errorf("list: %s", table)
	}
	if r := doppel(t, invocation{args: []string{"requests", "clear", "--admin", s.admin}}); r.code != wantOK {
		t.Errorf("clear: %s", r)
	}
	if r := doppel(t, invocation{args: []string{"requests", "list", "--admin", s.admin, "-o", "json"}}); !strings.HasPrefix(r.stdout, `{"requests":[]`) {
		t.Errorf("after clear: %s", r)
	}
}

// TestRequestsTableNamesEveryFault: requests list and tail name in their
// FAULT column what fired for each request, as the dashboard does: a
// mock, loss, latency with the wait taken, abort with where it cut, hang,
// bandwidth.
func TestRequestsTableNamesEveryFault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mock := func(name, faults string) string {
		return fmt.Sprintf("      - {name: %s, request: {method: GET, url: \"^/%s$\"}, response: {status: 200, body: \"%s\"}, proxy: {%s}}\n", name, name, name, faults)
	}
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n  - name: shop\n    type: http\n    url: http://127.0.0.1:9/\n    mocks:\n"+
		mock("plain", "")+
		mock("lost", "loss: {percentage: 1, status: 503}")+
		mock("slow", "latency: {percentage: 1, min: 0.05, max: 0.05}")+
		mock("cut", "abort: {percentage: 1, at: request}")+
		mock("trimmed", "abort: {percentage: 1, at: body, after: 2}")+
		mock("held", "hang: {percentage: 1, seconds: 0.05}")+
		mock("paced", "bandwidth: {percentage: 1, bytes_per_second: 1Mi}"))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := "http://" + adminAddrOf(t, p)
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)

	want := map[string]*regexp.Regexp{
		"/plain":   regexp.MustCompile(`  mock$`),
		"/lost":    regexp.MustCompile(`  mock, loss$`),
		"/slow":    regexp.MustCompile(`  mock, latency (4\d|[5-9]\d|\d{3,}) ms$`),
		"/cut":     regexp.MustCompile(`  mock, abort request$`),
		"/trimmed": regexp.MustCompile(`  mock, abort body$`),
		"/held":    regexp.MustCompile(`  mock, hang$`),
		"/paced":   regexp.MustCompile(`  mock, bandwidth$`),
	}
	for path := range want {
		if res, err := newClient().Get("http://" + addr + path); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	// rowsOf are the table's rows by path.
	rowsOf := func(out string) map[string]string {
		rows := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 5 {
				rows[f[5]] = l
			}
		}
		return rows
	}

	// tail, from before the requests, until it has printed each.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tail := exec.CommandContext(ctx, doppelBin, "requests", "tail", "--admin", admin, "--since", since)
	tail.Env = cleanEnv()
	stdout, _ := tail.StdoutPipe()
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = tail.Wait() }()
	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	for len(rowsOf(printed.String())) < len(want)+1 && sc.Scan() { // the rows and the header
		printed.WriteString(sc.Text() + "\n")
	}
	list := doppel(t, invocation{args: []string{"requests", "list", "--admin", admin}})
	if list.code != wantOK {
		t.Fatalf("list: %s", list)
	}
	for name, out := range map[string]string{"tail": printed.String(), "list": list.stdout} {
		rows := rowsOf(out)
		for path, re := range want {
			if !re.MatchString(rows[path]) {
				t.Errorf("%s: the row of %s is %q, want it to end %s\n%s", name, path, rows[path], re, out)
			}
		}
	}
}
