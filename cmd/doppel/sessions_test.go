package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
)

// TestSessionsChooseTheirOwnFaults: two suites share one Doppel; each
// session's mocks and faults apply to its requests only, expire by
// themselves, and are written with compare-and-swap.
func TestSessionsChooseTheirOwnFaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - name: item
        request: {method: GET, url: "^/item$"}
        response: {status: 200, body: "the proxy's item"}
`)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	s := serveArgs(t, dir, nil, "serve", "--config", cfg)
	defer s.stop(t)

	create := func(body string) response {
		t.Helper()
		return call(t, "POST", s.admin+"/api/v1/sessions", body)
	}
	r := create(`{"id": "suite-a", "ttl": 2, "proxies": {"shop": {
		"loss": {"percentage": 1.0, "status": 503, "when": {"count": {"first": 1}}},
		"mocks": [{"name": "item", "request": {"method": "GET", "url": "^/item$"}, "response": {"status": 200, "body": "suite a's item"}}]}}}`)
	var created struct {
		ID, Revision string
		ExpiresAt    string `json:"expires_at"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil || r.status != 201 || created.ID != "suite-a" || r.header.Get("Location") != "/api/v1/sessions/suite-a" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	b := create(`{"proxies": {"shop": {"latency": {"percentage": 1, "min": 0, "max": 0}}}}`)
	var other struct{ ID string }
	_ = json.Unmarshal(b.body, &other)
	if b.status != 201 || len(other.ID) != 22 {
		t.Fatalf("a session with an id of Doppel's: %d %s", b.status, b.body)
	}

	get := func(path, session string) response {
		t.Helper()
		if session == "" {
			return call(t, "GET", s.proxy+path, "")
		}
		return call(t, "GET", s.proxy+path, "", "X-Doppel-Session", session)
	}
	in := func(session string) response { return get("/item", session) }
	// Suite a: its mock before the proxy's; its loss on what the proxy
	// forwards (nothing listens upstream: 502 when it does not fire),
	// counted for the session alone.
	if r := in("suite-a"); r.status != 200 || string(r.body) != "suite a's item" {
		t.Errorf("suite a's item: %d %s", r.status, r.body)
	}
	if r := get("/elsewhere", "suite-a"); r.status != 503 {
		t.Errorf("suite a's first forwarded request: %d %s", r.status, r.body)
	}
	if r := get("/elsewhere", "suite-a"); r.status != 502 {
		t.Errorf("suite a's second forwarded request: %d %s", r.status, r.body)
	}
	// Suite b and no session: the proxy's own.
	for _, id := range []string{other.ID, "", "no-such-session", "bad id!"} {
		if r := in(id); r.status != 200 || string(r.body) != "the proxy's item" {
			t.Errorf("session %q: %d %s", id, r.status, r.body)
		}
		if r := get("/elsewhere", id); r.status != 502 {
			t.Errorf("session %q forwarded: %d %s", id, r.status, r.body)
		}
	}

	// The journal knows the session; verify can be scoped to it.
	v := doppel(t, invocation{args: []string{"requests", "verify", "--admin", s.admin, "--file",
		writeFile(t, t.TempDir(), "v.json", `{"match": {"session": "suite-a"}, "count": {"min": 3, "max": 3}}`)}})
	if v.code != wantOK {
		t.Errorf("verify in suite-a: %s", v)
	}
	list := mustGet(t, newClient(), s.admin+"/api/v1/requests?session=suite-a", nil)
	if n := strings.Count(string(list.body), `"session":"suite-a"`); n != 3 {
		t.Errorf("%d entries of suite-a: %s", n, list.body)
	}

	// The session's counters are its own, listed and reset apart from the
	// proxy's.
	own := mustGet(t, newClient(), s.admin+"/api/v1/proxies/shop/counters?session=suite-a", nil)
	if own.status != 200 || !strings.Contains(string(own.body), `"count":2`) {
		t.Errorf("suite-a's counters: %d %s", own.status, own.body)
	}
	if base := mustGet(t, newClient(), s.admin+"/api/v1/proxies/shop/counters", nil); !strings.Contains(string(base.body), `"counters":[]`) {
		t.Errorf("the proxy's own counters: %s", base.body)
	}
	if r := call(t, "DELETE", s.admin+"/api/v1/proxies/shop/counters?session=suite-a", ""); r.status != 204 {
		t.Errorf("reset suite-a's counters: %d %s", r.status, r.body)
	}
	if r := get("/elsewhere", "suite-a"); r.status != 503 {
		t.Errorf("suite-a's first forwarded request after its reset: %d", r.status)
	}
	if r := mustGet(t, newClient(), s.admin+"/api/v1/proxies/shop/counters?session=nobody", nil); r.status != 404 {
		t.Errorf("an unknown session's counters: %d", r.status)
	}

	// Compare-and-swap: a stale revision is refused; none is 428.
	put := func(rev, body string) response {
		t.Helper()
		if rev == "" {
			return call(t, "PUT", s.admin+"/api/v1/sessions/suite-a", body)
		}
		return call(t, "PUT", s.admin+"/api/v1/sessions/suite-a", body, "If-Match", `"`+rev+`"`)
	}
	next := `{"ttl": 2, "proxies": {"shop": {"loss": {"percentage": 1.0, "status": 418}}}}`
	if r := put("", next); r.status != 428 {
		t.Errorf("no revision: %d %s", r.status, r.body)
	}
	if r := put("0000000000000000", next); r.status != 409 || envelopeCode(t, string(r.body)) != "REVISION_MISMATCH" {
		t.Errorf("a stale revision: %d %s", r.status, r.body)
	}
	if r := put(created.Revision, next); r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if r := get("/elsewhere", "suite-a"); r.status != 418 {
		t.Errorf("after the update: %d", r.status)
	}
	got := mustGet(t, newClient(), s.admin+"/api/v1/sessions/suite-a", nil)
	if got.status != 200 || !strings.Contains(string(got.body), `"status": 418`) && !strings.Contains(string(got.body), `"status":418`) {
		t.Errorf("read: %d %s", got.status, got.body)
	}

	// Bad input changes nothing.
	for body, want := range map[string]string{
		`{"proxies": {"nobody": {}}}`:                                               "proxies.nobody: no proxy is named `nobody`",
		`{"ttl": 0, "proxies": {"shop": {}}}`:                                       "ttl: 0 is not a session's ttl",
		`{"ttl": 86401, "proxies": {"shop": {}}}`:                                   "1 to 86400",
		`{"id": "suite-a", "proxies": {"shop": {}}}`:                                "a session with that id is live",
		`{"proxies": {"shop": {"latency": {"percentage": 1, "min": 2, "max": 1}}}}`: "proxies.shop.latency.min: min must be",
		`{"proxies": {"shop": {"mocks": [{"name": "m", "request": {"method": "GET", "url": "x"}, "response": {"status": 200}}]}}}`: "proxies.shop.mocks[0].name",
	} {
		if r := create(body); r.status < 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("%s: %d %s, want ...%s...", body, r.status, r.body, want)
		}
	}

	// An overlay is checked whole: a refused value, a rule beside it and an
	// unknown proxy with its own mistake, in one answer.
	whole := create(`{"proxies": {"shop": {"loss": {"percentage": 45, "status": 503}, "latency": {"percentage": 1, "min": 2, "max": 1}},
		"nobody": {"latency": {"percentage": 1, "min": 3, "max": 1}}}}`)
	for _, want := range []string{"proxies.shop.loss.percentage", "proxies.shop.latency.min", "proxies.nobody", "proxies.nobody.latency.min"} {
		if whole.status != 400 || !strings.Contains(string(whole.body), want+": ") {
			t.Errorf("a session with four mistakes: %d %s, want a violation at %s", whole.status, whole.body, want)
		}
	}

	// A session ends by itself at its expiry, with no request needed:
	// the list no longer shows it.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		l := mustGet(t, newClient(), s.admin+"/api/v1/sessions", nil)
		if !strings.Contains(string(l.body), "suite-a") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l := mustGet(t, newClient(), s.admin+"/api/v1/sessions", nil); strings.Contains(string(l.body), "suite-a") {
		t.Errorf("suite-a outlived its ttl: %s", l.body)
	}
	if r := get("/elsewhere", "suite-a"); r.status != 502 {
		t.Errorf("an expired session still applies: %d", r.status)
	}
	expired := false
	for _, l := range s.p.jsonLines() {
		if l["message"] == "a session ended: it expired" && l["session"] == "suite-a" {
			expired = true
		}
	}
	if !expired {
		t.Error("the expiry was not logged")
	}
	if r := call(t, "DELETE", s.admin+"/api/v1/sessions/"+other.ID, ""); r.status != 204 {
		t.Errorf("delete: %d", r.status)
	}
	if r := call(t, "DELETE", s.admin+"/api/v1/sessions/"+other.ID, ""); r.status != 404 {
		t.Errorf("delete again: %d", r.status)
	}

}

// checkSessionsExample holds examples/sessions.yaml and its suites to
// their comments: the Go suites see their own faults only, and so does the
// Python one.
func checkSessionsExample(t *testing.T, root string) {
	s := serveExample(t, root, "sessions.yaml", nil)
	defer s.stop(t)
	bin := filepath.Join(t.TempDir(), "sessions")
	if out, err := exec.Command("go", "build", "-o", bin, repoPath(t, "examples/sessions")).CombinedOutput(); err != nil {
		t.Fatalf("building examples/sessions: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--proxy", s.proxy, "--admin", s.admin).CombinedOutput()
	if err != nil || strings.Count(string(out), "outage: request") != 5 || strings.Count(string(out), "got 200") != 5 {
		t.Errorf("the Go suites: %v\n%s", err, out)
	}
	if l := mustGet(t, newClient(), s.admin+"/api/v1/sessions", map[string]string{"X-Proxy-Authorization": "Bearer sessions-example-token-0123456789ab"}); !strings.Contains(string(l.body), `"sessions":[]`) {
		t.Errorf("the suites left sessions behind: %s", l.body)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is needed to run examples/sessions/test_catalog.py")
		}
		t.Log("no python3 here: examples/sessions/test_catalog.py not run")
		return
	}
	cmd := exec.Command(python, "-m", "unittest", "-v", "test_catalog")
	cmd.Dir = repoPath(t, "examples/sessions")
	cmd.Env = append(cleanEnv(), "DOPPEL_PROXY="+s.proxy, "DOPPEL_ADMIN="+s.admin, "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
		t.Errorf("the Python suite: %v\n%s", err, out)
	}
}

// TestSessionsAndCountersFromTheCommandLine: a script creates a session,
// takes its id, reads and resets its counters, and ends it.
func TestSessionsAndCountersFromTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("shop", "http://127.0.0.1:9", ""))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	s := serveArgs(t, dir, nil, "serve", "--config", cfg)
	defer s.stop(t)
	run := func(args ...string) result {
		t.Helper()
		return doppel(t, invocation{args: append(args, "--admin", s.admin)})
	}
	body := writeFile(t, t.TempDir(), "s.json", `{"proxies": {"shop": {"loss": {"percentage": 1.0, "status": 503, "when": {"count": {"first": 1}}}}}}`)
	r := run("sessions", "create", "--file", body)
	id := strings.TrimSpace(r.stdout)
	if r.code != wantOK || len(id) != 22 {
		t.Fatalf("create: %s", r)
	}
	if got := call(t, "GET", s.proxy+"/x", "", "X-Doppel-Session", id); got.status != 503 {
		t.Errorf("in the session: %d", got.status)
	}
	if r := run("sessions", "list"); r.code != wantOK || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "shop") {
		t.Errorf("list: %s", r)
	}
	if r := run("counters", "list", "--proxy", "shop", "--session", id); r.code != wantOK || !strings.Contains(r.stdout, "loss") {
		t.Errorf("counters list: %s", r)
	}
	if r := run("counters", "reset", "--proxy", "shop", "--session", id); r.code != wantOK {
		t.Errorf("counters reset: %s", r)
	}
	if got := call(t, "GET", s.proxy+"/x", "", "X-Doppel-Session", id); got.status != 503 {
		t.Errorf("in the session after a reset: %d", got.status)
	}
	if r := run("counters", "list", "--proxy", "shop", "-o", "json"); r.code != wantOK || !strings.Contains(r.stdout, `"counters":[]`) {
		t.Errorf("the proxy's own counters: %s", r)
	}
	if r := run("sessions", "end", id); r.code != wantOK || r.stdout != "ended: "+id+"\n" {
		t.Errorf("end: %s", r)
	}
	if r := run("sessions", "end", id); r.code == wantOK || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("end again: %s", r)
	}
	if r := run("counters", "list"); r.code == wantOK || !strings.Contains(r.stderr, "--proxy is required") {
		t.Errorf("no proxy: %s", r)
	}
}

// TestSessionsAreBoundedInSize (SPEC §18.4): an overlay over 256 KiB is
// refused naming the bound (300 of 900 KB leave the process's peak RSS
// under 400 MiB), and the live overlays together stop at 64 MiB: 300
// sessions of 250 KB fill it, the rest refused naming the bound; ending one
// makes room again.
func TestSessionsAreBoundedInSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n  - name: shop\n    type: http\n    url: http://127.0.0.1:9/\n")
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	s := serveArgs(t, dir, nil, "serve", "--config", cfg)
	defer s.stop(t)
	overlay := func(id string, size int) string {
		return `{"id": "` + id + `", "proxies": {"shop": {"mocks": [{"name": "big", "request": {"method": "GET", "url": "^/big$"}, "response": {"status": 200, "body": "` +
			strings.Repeat("x", size) + `"}}]}}}`
	}
	for i := range 300 {
		if status, body := postEarlyAnswered(t, s.admin+"/api/v1/sessions", overlay(fmt.Sprintf("big%d", i), 900_000)); status != 413 ||
			!strings.Contains(body, "UPLOAD_TOO_LARGE") || !strings.Contains(body, "at most 256 KiB") {
			t.Fatalf("a 900 KB overlay: %d %s", status, body)
		}
	}
	refusedPeak := procmem.MustPeak(t, s.p.cmd.Process.Pid)
	t.Logf("300 overlays of 900 KB refused: peak RSS %d MiB", refusedPeak>>20)
	if refusedPeak > 400<<20 {
		t.Errorf("peak RSS %d MiB after refusing 300 overlays of 900 KB, want under 400 MiB", refusedPeak>>20)
	}
	accepted, refused := 0, 0
	for i := range 300 {
		r := call(t, "POST", s.admin+"/api/v1/sessions", overlay(fmt.Sprintf("s%03d", i), 250_000))
		switch {
		case r.status == 201:
			accepted++
		case r.status == 413 && strings.Contains(string(r.body), "more than 64 MiB"):
			refused++
		default:
			t.Fatalf("session %d: %d %s", i, r.status, r.body)
		}
	}
	if want := (64 << 20) / 250_100; accepted < want-2 || accepted > want+2 || refused != 300-accepted {
		t.Errorf("%d sessions accepted and %d refused; about %d fit in 64 MiB", accepted, refused, want)
	}
	// What 64 MiB of overlays cost, compiled and kept: a generous bound.
	peak := procmem.MustPeak(t, s.p.cmd.Process.Pid)
	t.Logf("%d sessions of 250 KB live, %d refused: peak RSS %d MiB", accepted, refused, peak>>20)
	if peak > 800<<20 {
		t.Errorf("peak RSS %d MiB with 64 MiB of overlays live, want under 800 MiB", peak>>20)
	}
	if r := call(t, "DELETE", s.admin+"/api/v1/sessions/s000", ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", s.admin+"/api/v1/sessions", overlay("again", 250_000)); r.status != 201 {
		t.Errorf("after ending one: %d %s", r.status, r.body)
	}
}

// postEarlyAnswered POSTs body over a connection of its own and reads the
// answer while the body is still being written: a server that refuses a
// body by its size answers before reading all of it, and closes.
func postEarlyAnswered(t *testing.T, url, body string) (int, string) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		_, _ = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", u.RequestURI(), u.Host, len(body), body)
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
