package main

// The client's mistakes are the client's (SPEC §5.4, §9.7): stalled and
// malformed bodies, odd request ids, a missing Host, and an admin token
// sent to the proxy listener, all through the real binary.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawExchange sends raw bytes to addr and reads one answer; halfClose
// shuts the client's side after sending.
func rawExchange(t *testing.T, addr, request string, halfClose bool) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", request, err)
	}
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func envelopeCode(t *testing.T, body string) string {
	t.Helper()
	var e struct{ Status, Code, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Status != "error" {
		t.Fatalf("not the envelope: %q", body)
	}
	return e.Code
}

// seenHeaders is an upstream that answers with the headers it received.
func seenHeaders(t *testing.T) string {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = json.NewEncoder(w).Encode(r.Header)
	}).URL
}

const bodyMock = `    timeout: 1
    mocks:
      - name: broken
        request: {method: GET, url: "^/broken$", query: {n: .n}}
        response: {status: 200, body: "{% if n.x.y %}a{% endif %}{{ range }}"}
      - name: takes-body
        request: {method: POST, url: "^/mock$", body: {a: .a}}
        response: {status: 200, body: "a={{ a }}"}
      - name: takes-body-or-none
        request: {method: POST, url: "^/maybe$", body: {a: .a}}
        response: {status: 200, body: "a={{ a | default('none') }}"}
      - name: length-of-a-number
        request: {method: GET, url: "^/length$"}
        response: {status: 200, body: "{{ 5 | length }}"}
`

func TestClientMistakesAreTheClients(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("zeta", seenHeaders(t), "")+bodyMock)
	_, addr := serveUp(t, cfg, nil)
	for _, c := range []struct {
		name, request string
		halfClose     bool
		status        int
		code          string
	}{
		{"a malformed chunk, forwarded", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", false, 400, "INVALID_REQUEST_BODY"},
		{"a malformed chunk, to a mock", "POST /mock HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", false, 400, "INVALID_REQUEST_BODY"},
		{"a body shorter than its Content-Length, forwarded", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", true, 400, "INVALID_REQUEST_BODY"},
		{"a body shorter than its Content-Length, to a mock", "POST /mock HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", true, 400, "INVALID_REQUEST_BODY"},
		{"a transfer coding nobody can read", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: bogus\r\n\r\nabc", false, 400, "INVALID_REQUEST_BODY"},
		{"a stalled body, forwarded", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", false, 408, "REQUEST_TIMEOUT"},
		{"a stalled body, to a mock", "POST /mock HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", false, 408, "REQUEST_TIMEOUT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := rawExchange(t, addr, c.request, c.halfClose)
			if res.StatusCode != c.status || envelopeCode(t, body) != c.code {
				t.Fatalf("%d %s, want %d %s", res.StatusCode, body, c.status, c.code)
			}
			if !res.Close {
				t.Error("the connection stays open after a body that cannot be trusted")
			}
		})
	}

	t.Run("a `.` or `..` segment is refused in 1.1's words, a backslash too", func(t *testing.T) {
		for path, want := range map[string]string{
			"/./admin":  "request path `/./admin` contains a `.` or `..` segment",
			"/a/%2e/b":  "request path `/a/%2e/b` contains a `.` or `..` segment",
			"/../x":     "request path `/../x` contains a `.` or `..` segment",
			"/a/%2E%2E": "request path `/a/%2E%2E` contains a `.` or `..` segment",
			"/a%5cb":    "request path `/a%5cb` contains a backslash",
		} {
			res, body := rawExchange(t, addr, "GET "+path+"?q=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false)
			var e struct{ Code, Message string }
			_ = json.Unmarshal([]byte(body), &e)
			if res.StatusCode != 400 || envelopeCode(t, body) != "INVALID_REQUEST_PATH" || e.Message != want {
				t.Errorf("%s: %d %s, want 400 INVALID_REQUEST_PATH %q", path, res.StatusCode, body, want)
			}
		}
		if res, _ := rawExchange(t, addr, "GET /a.b/.well-known/x. HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false); res.StatusCode != 200 {
			t.Errorf("a dot inside a segment was refused: %d", res.StatusCode)
		}
	})

	t.Run("a filter given the wrong type fails naming the expression", func(t *testing.T) {
		res, body := rawExchange(t, addr, "GET /length HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false)
		if res.StatusCode != 500 || envelopeCode(t, body) != "TEMPLATE_RENDER_ERROR" || !strings.Contains(body, "{{ 5 | length }}") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	})

	t.Run("an empty body binds nothing", func(t *testing.T) {
		res, body := rawExchange(t, addr, "POST /maybe HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false)
		if res.StatusCode != 200 || body != "a=none" {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		res, body = rawExchange(t, addr, "POST /mock HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false)
		if res.StatusCode != 500 || envelopeCode(t, body) != "TEMPLATE_RENDER_ERROR" {
			t.Fatalf("an undefined body variable: %d %s", res.StatusCode, body)
		}
		res, body = rawExchange(t, addr, "POST /maybe HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nConnection: close\r\n\r\n ", false)
		if res.StatusCode != 500 || envelopeCode(t, body) != "BODY_EXTRACTION_ERROR" {
			t.Fatalf("a blank body is still not JSON: %d %s", res.StatusCode, body)
		}
	})

	t.Run("X-Request-ID over 200 bytes or not visible ASCII is replaced", func(t *testing.T) {
		for _, id := range []string{strings.Repeat("a", 201), "two words", "caf\xc3\xa9"} {
			res, _ := rawExchange(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\nX-Request-ID: "+id+"\r\nConnection: close\r\n\r\n", false)
			got := res.Header.Get("X-Request-Id")
			if got == id || !mintedID.MatchString(got) {
				t.Errorf("id %.20q… came back as %q", id, got)
			}
		}
		res, _ := rawExchange(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false)
		if got := res.Header.Get("X-Request-Id"); !mintedID.MatchString(got) {
			t.Errorf("a minted id is %q, not 32 lowercase hex digits", got)
		}
		ok := strings.Repeat("b", 200)
		if res, _ := rawExchange(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\nX-Request-ID: "+ok+"\r\nConnection: close\r\n\r\n", false); res.Header.Get("X-Request-Id") != ok {
			t.Error("a 200-byte id was not kept")
		}
	})

	t.Run("a render error says where and why, and the log line its code", func(t *testing.T) {
		res, body := rawExchange(t, addr, "GET /broken?n=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false)
		if res.StatusCode != 500 || envelopeCode(t, body) != "TEMPLATE_RENDER_ERROR" {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		if !strings.Contains(body, "line 1, column 7, in `{% if n.x.y %}`") || strings.Contains(body, "ControlStructure") {
			t.Errorf("the message: %s", body)
		}
	})

	t.Run("HTTP/1.0 without Host claims no forwarded host", func(t *testing.T) {
		_, body := rawExchange(t, addr, "GET /x HTTP/1.0\r\n\r\n", false)
		var h http.Header
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if v, ok := h["X-Forwarded-Host"]; ok {
			t.Errorf("X-Forwarded-Host: %q", v)
		}
		if h.Get("X-Forwarded-For") == "" {
			t.Error("the other forwarding headers went too")
		}
	})
}

// goroutines reads go_goroutines from the admin listener's metrics.
func goroutines(t testing.TB, adminAddr string) int {
	t.Helper()
	r := mustGet(t, newClient(), "http://"+adminAddr+"/metrics", nil)
	for l := range strings.SplitSeq(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("no go_goroutines")
	return 0
}

// TestStalledBodiesAreAnsweredAndFreed: 100 clients that send part of a
// body and stop are each answered 408 and their connections closed within
// the proxy's timeout, and nothing of theirs is left running.
func TestStalledBodiesAreAnsweredAndFreed(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("zeta", seenHeaders(t), "")+bodyMock)
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")
	baseline := goroutines(t, adminAddr)

	const clients = 100
	start := time.Now()
	var wg sync.WaitGroup
	answers := make([]string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/x"
			if i%2 == 1 {
				path = "/mock"
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(15 * time.Second))
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{\"a\": ", path)
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			// The connection is closed after the answer.
			rest, _ := io.ReadAll(res.Body)
			extra, _ := io.ReadAll(c)
			answers[i] = fmt.Sprintf("%d %v %s%s", res.StatusCode, res.Close, rest, extra)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for i, a := range answers {
		if !strings.HasPrefix(a, "408 true ") || !strings.Contains(a, "REQUEST_TIMEOUT") {
			t.Fatalf("client %d: %s", i, a)
		}
	}
	// Each is bound by the proxy's timeout of 1 s (a read waits at most
	// 10 s for a byte), not by the client.
	if took > 6*time.Second {
		t.Errorf("100 stalled clients took %v to be answered", took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := goroutines(t, adminAddr)
		if n <= baseline+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d after the stalled clients, %d before", n, baseline)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAdminTokensStayOnTheAdminSide: the admin header carrying a
// configured token (the document's or the environment's) is removed before
// an upstream or a mock sees it; the log line names the token, never its
// value; the same header with another value is the client's and passes.
func TestAdminTokensStayOnTheAdminSide(t *testing.T) {
	t.Parallel()
	const stored = "0f8d3b2a-7c41-4e55-9a1e-6b2d8c4f1a90"
	const fromEnv = "5a1c9e7d-2b44-4f0e-8d3a-1e6f7b9c2d80"
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", seenHeaders(t), "")+`    mocks:
      - name: who
        request: {method: GET, url: "^/who$", headers: {auth: X-Proxy-Authorization}}
        response: {status: 200, body: "auth={{ auth | default('none') }}"}
`)
	src := readFile(t, cfg)
	src = strings.Replace(src, "admin:\n", "admin:\n  tokens:\n    - {name: ops, group: admin, token: "+stored+"}\n", 1)
	writeFile(t, dir, "main.yaml", src)
	env := map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + fromEnv + `"}}`}
	p, addr := serveUp(t, cfg, env)

	c := newClient()
	for _, tok := range []struct{ name, value string }{{"ops", stored}, {"ci", fromEnv}} {
		r := mustGet(t, c, "http://"+addr+"/x", map[string]string{"X-Proxy-Authorization": "Bearer " + tok.value})
		if strings.Contains(string(r.body), tok.value) || strings.Contains(string(r.body), "X-Proxy-Authorization") {
			t.Errorf("the upstream saw %s's token: %s", tok.name, r.body)
		}
		if r := mustGet(t, c, "http://"+addr+"/who", map[string]string{"X-Proxy-Authorization": "Bearer " + tok.value}); string(r.body) != "auth=none" {
			t.Errorf("a mock saw %s's token: %s", tok.name, r.body)
		}
	}
	// The admin API takes the standard Authorization too: so is it withheld.
	if r := mustGet(t, c, "http://"+addr+"/x", map[string]string{"Authorization": "Bearer " + stored}); strings.Contains(string(r.body), stored) {
		t.Errorf("the upstream saw an admin token in Authorization: %s", r.body)
	}
	r := mustGet(t, c, "http://"+addr+"/x", map[string]string{"X-Proxy-Authorization": "Bearer the-upstreams-own", "Authorization": "Bearer its-own-too"})
	if !strings.Contains(string(r.body), "the-upstreams-own") || !strings.Contains(string(r.body), "its-own-too") {
		t.Errorf("a value that is no admin token was removed: %s", r.body)
	}
	removed := map[string]int{}
	p.waitLine("the request lines", 5*time.Second, func(l string) bool {
		if isRequestLine(l) {
			if n := lineField(l, "admin_token_removed"); n != "" {
				removed[n]++
			}
		}
		return removed["ops"] == 3 && removed["ci"] == 2
	})
	for _, secret := range []string{stored, fromEnv} {
		if strings.Contains(p.stdout(), secret) {
			t.Fatalf("a token's value reached the log")
		}
	}
}

// TestConnectionNamedHeadersThroughTheBinary: an upstream that answers
// `Connection: close, X-Internal` keeps X-Internal to itself.
func TestConnectionNamedHeadersThroughTheBinary(t *testing.T) {
	t.Parallel()
	upAddr := tcpServer(t, func(c net.Conn) {
		_, _ = http.ReadRequest(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Internal: secret\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok")
	})
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("zeta", "http://"+upAddr, ""))
	_, addr := serveUp(t, cfg, nil)
	r := mustGet(t, newClient(), "http://"+addr+"/x", nil)
	if r.status != 200 || string(r.body) != "ok" || r.header.Get("X-Kept") != "yes" {
		t.Fatalf("%d %q %v", r.status, r.body, r.header)
	}
	if v := r.header.Get("X-Internal"); v != "" {
		t.Errorf("a header the upstream named in Connection reached the client: X-Internal: %s", v)
	}
}

// TestClientsThatStopReadingAreCut: clients that ask for a delayed answer
// too large to be held (a forwarded 64 MiB body, an 8 MiB mock) and never
// read it hold their handler, buffers and upstream connection at most the
// write stall bound (30 s) after Doppel's writes stop, then are cut: the
// upstream's connection closes, the goroutines return to their count,
// each request is logged, and a client reading meanwhile is answered at
// once.
func TestClientsThatStopReadingAreCut(t *testing.T) {
	t.Parallel()
	const stall = 30 * time.Second
	var ended atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/huge" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		defer ended.Add(1)
		const n = 64 << 20
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Header().Set("Content-Type", "application/octet-stream")
		chunk := bytes.Repeat([]byte("u"), 64<<10)
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	cfg := serveConfig(t, t.TempDir(), 0, 0, fmt.Sprintf(`proxies:
  - name: slow
    type: http
    url: %s/
    latency: {percentage: 1, min: 1, max: 1}
    mocks:
      - name: big
        request: {method: GET, url: "^/mock/big$"}
        response: {status: 200, body: "{{ 'm' * 8388608 }}"}
`, up.URL))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(t, p)
	baseline := goroutines(t, admin)

	const forwarded = 10
	paths := []string{"/mock/big"}
	for range forwarded {
		paths = append(paths, "/huge")
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, path := range paths {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: d\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Their answers back up: each holds its handler (and, forwarded, the
	// transport's two goroutines).
	deadline := time.Now().Add(10 * time.Second)
	for goroutines(t, admin) < baseline+len(paths) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stuck := time.Now()
	if g := goroutines(t, admin); g < baseline+len(paths) {
		t.Fatalf("%d goroutines with %d answers unread, from %d", g, len(paths), baseline)
	}
	if r := call(t, "GET", "http://"+addr+"/small", ""); r.status != 200 {
		t.Errorf("a client that reads, meanwhile: %d", r.status)
	}
	// Cut within the bound of the last write that went through.
	// A few of the process's own goroutines come and go meanwhile.
	const slack = 5
	deadline = time.Now().Add(stall + 15*time.Second)
	g := goroutines(t, admin)
	for (g > baseline+slack || ended.Load() < forwarded) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		g = goroutines(t, admin)
	}
	took := time.Since(stuck)
	if g > baseline+slack {
		t.Fatalf("%d goroutines %v after the clients stopped reading, %d before", g, took.Round(time.Second), baseline)
	}
	if n := ended.Load(); n < forwarded {
		t.Fatalf("%d of %d upstream answers ended %v after their clients stopped reading", n, forwarded, took.Round(time.Second))
	}
	if took < stall-5*time.Second {
		t.Errorf("cut after %v, before the %v bound", took.Round(time.Second), stall)
	}
	// Each line is written as its answer ends: at the cut.
	logged := 0
	for _, l := range p.jsonLines() {
		if !isRequest(l) || (l["path"] != "/huge" && l["path"] != "/mock/big") {
			continue
		}
		logged++
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["timestamp"]))
		if err != nil || at.Before(stuck.Add(stall-5*time.Second)) {
			t.Errorf("logged at %v, %v after the answers backed up: %v", l["timestamp"], at.Sub(stuck).Round(time.Second), l)
		}
	}
	if logged != len(paths) {
		t.Errorf("%d of %d cut answers logged", logged, len(paths))
	}
}
