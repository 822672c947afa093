package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
)

// wire is what a raw client read of one answer: every byte until the
// connection ended, and how it ended (io.EOF for a FIN).
type wire struct {
	got  []byte
	end  error
	took time.Duration
	// firstByte is when the first byte came, from the request.
	firstByte time.Duration
}

// reset reports whether the connection ended with a TCP RST.
func (w wire) reset() bool { return errors.Is(w.end, syscall.ECONNRESET) }

// head and body split what came at the end of the headers.
func (w wire) head() string {
	h, _, _ := bytes.Cut(w.got, []byte("\r\n\r\n"))
	return string(h)
}

func (w wire) body() []byte {
	_, b, ok := bytes.Cut(w.got, []byte("\r\n\r\n"))
	if !ok {
		return nil
	}
	return b
}

// rawRead sends one GET on a new connection and reads until it ends.
func rawRead(t *testing.T, addr, path string, header ...string) wire {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET " + path + " HTTP/1.1\r\nHost: doppel\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	start := time.Now()
	if _, err := io.WriteString(c, req+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var w wire
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && w.got == nil {
			w.firstByte = time.Since(start)
		}
		w.got = append(w.got, buf[:n]...)
		if err != nil {
			w.end, w.took = err, time.Since(start)
			return w
		}
	}
}

// faultUpstream answers /data with 4 KiB (Content-Length) and /big with
// 1 MiB, both binary, counting the requests it receives by path.
func faultUpstream(t testing.TB) (url string, hits func(path string) int64) {
	var mu sync.Mutex
	counts := map[string]*atomic.Int64{}
	count := func(p string) *atomic.Int64 {
		mu.Lock()
		defer mu.Unlock()
		if counts[p] == nil {
			counts[p] = &atomic.Int64{}
		}
		return counts[p]
	}
	srv := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		count(r.URL.Path).Add(1)
		n := 4 << 10
		if r.URL.Path == "/big" {
			n = 1 << 20
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		// Not text: no URL rewriting buffers it, it streams.
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(bytes.Repeat([]byte("u"), n))
	})
	return srv.URL, func(p string) int64 { return count(p).Load() }
}

// faultProxies are one proxy per fault, chosen with X-Fault.
func faultProxies(up string) string {
	var b strings.Builder
	b.WriteString("proxies:\n")
	for _, p := range []struct{ name, faults string }{
		{"cut-request", "abort: {percentage: 1, at: request}"},
		{"cut-response", "abort: {percentage: 1, at: response}"},
		{"cut-body", "abort: {percentage: 1, at: body, after: 1Ki}"},
		{"close-body", "abort: {percentage: 1, at: body, after: 100, how: close}"},
		{"hang", "hang: {percentage: 1, seconds: 1}"},
		{"paced", "bandwidth: {percentage: 1, bytes_per_second: 256Ki}"},
		{"trickle", "bandwidth: {percentage: 1, bytes_per_second: 1Ki}"},
		{"lossy", "loss: {percentage: 1, status: 429, retry_after: 7, headers: {X-Why: quota}}\n    abort: {percentage: 1, at: request}"},
	} {
		fmt.Fprintf(&b, "  - name: %s\n    type: http\n    url: %s/\n    resolve: {type: header, header: X-Fault}\n    %s\n", p.name, up, p.faults)
	}
	// A default proxy whose faults its mocks do not inherit, and mocks
	// with their own.
	fmt.Fprintf(&b, `  - name: plain
    type: http
    url: %s/
    abort: {percentage: 1, at: request}
    mocks:
      - name: inherits-nothing
        request: {method: GET, url: "^/mock/plain$"}
        response: {status: 200, body: "plain"}
        proxy: {latency: {percentage: 1, min: 0, max: 0}}
      - name: cut
        request: {method: GET, url: "^/mock/cut$"}
        response: {status: 200, body: "0123456789abcdefghij"}
        proxy: {abort: {percentage: 1, at: body, after: 10, how: close}}
      - name: cut-response
        request: {method: GET, url: "^/mock/cut-response$"}
        response: {status: 200, body: "never"}
        proxy: {abort: {percentage: 1, at: response}}
      - name: paced
        request: {method: GET, url: "^/mock/paced$"}
        response: {status: 200, body: "{{ 'm' * 1048576 }}"}
        proxy: {bandwidth: {percentage: 1, bytes_per_second: 256Ki}}
      - name: hung
        request: {method: GET, url: "^/mock/hung$"}
        response: {status: 200, body: "never"}
        proxy: {hang: {percentage: 1, seconds: 30}}
      - name: delayed
        request: {method: GET, url: "^/mock/delayed$"}
        response: {status: 200, json: '{"ok": true}'}
        proxy: {latency: {percentage: 1, min: 30, max: 30}}
`, up)
	return b.String()
}

// TestTransportFaultsOnTheWire: each fault as a raw client sees it: a
// reset or a FIN where the SPEC says, the byte counts, the upstream
// reached or not; the log line, the metric and the journal name it.
func TestTransportFaultsOnTheWire(t *testing.T) {
	t.Parallel()
	up, hits := faultUpstream(t)
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, faultProxies(up))
	// The admin API public, for the journal.
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(t, p)

	t.Run("abort at request never reaches the upstream", func(t *testing.T) {
		w := rawRead(t, addr, "/r1", "X-Fault", "cut-request")
		if !w.reset() || len(w.got) != 0 {
			t.Errorf("got %d bytes, ended %v; want nothing and a reset", len(w.got), w.end)
		}
		if n := hits("/r1"); n != 0 {
			t.Errorf("the upstream saw it %d times", n)
		}
	})
	t.Run("abort at response: the upstream once, the client no status line", func(t *testing.T) {
		w := rawRead(t, addr, "/r2", "X-Fault", "cut-response")
		if !w.reset() || len(w.got) != 0 {
			t.Errorf("got %q, ended %v; want nothing and a reset", w.got, w.end)
		}
		if n := hits("/r2"); n != 1 {
			t.Errorf("the upstream saw it %d times, want 1", n)
		}
	})
	t.Run("abort at body: the headers, after bytes, a reset", func(t *testing.T) {
		w := rawRead(t, addr, "/data", "X-Fault", "cut-body")
		if !strings.HasPrefix(w.head(), "HTTP/1.1 200") || !strings.Contains(w.head(), "Content-Length: 4096") {
			t.Errorf("head %q", w.head())
		}
		if len(w.body()) != 1024 || !w.reset() {
			t.Errorf("%d bytes of body, ended %v; want 1024 and a reset", len(w.body()), w.end)
		}
	})
	t.Run("how close is a FIN", func(t *testing.T) {
		w := rawRead(t, addr, "/data", "X-Fault", "close-body")
		if len(w.body()) != 100 || w.end != io.EOF {
			t.Errorf("%d bytes of body, ended %v; want 100 and EOF", len(w.body()), w.end)
		}
	})
	t.Run("a mock's answer is cut after its own bytes", func(t *testing.T) {
		w := rawRead(t, addr, "/mock/cut")
		if !strings.Contains(w.head(), "Content-Length: 20") || string(w.body()) != "0123456789" || w.end != io.EOF {
			t.Errorf("got %q, ended %v", w.got, w.end)
		}
		// at: response on a mock acts as at: request.
		if w := rawRead(t, addr, "/mock/cut-response"); !w.reset() || len(w.got) != 0 {
			t.Errorf("a mock's at: response: got %q, ended %v", w.got, w.end)
		}
	})
	t.Run("a mock inherits none of the proxy's abort", func(t *testing.T) {
		if r := mustGet(t, newClient(), "http://"+addr+"/mock/plain", nil); r.status != 200 || string(r.body) != "plain" {
			t.Errorf("got %d %q", r.status, r.body)
		}
		if w := rawRead(t, addr, "/elsewhere"); !w.reset() {
			t.Errorf("the proxy's own abort did not fire: %v", w.end)
		}
	})
	t.Run("hang: nothing for its seconds, no upstream, then a FIN", func(t *testing.T) {
		w := rawRead(t, addr, "/h1", "X-Fault", "hang")
		if len(w.got) != 0 || w.end != io.EOF || w.took < time.Second || w.took > 3*time.Second {
			t.Errorf("got %d bytes after %v, ended %v; want none after 1 s, then EOF", len(w.got), w.took, w.end)
		}
		if n := hits("/h1"); n != 0 {
			t.Errorf("the upstream saw it %d times", n)
		}
	})
	t.Run("loss beats abort, with retry_after and headers", func(t *testing.T) {
		r := mustGet(t, newClient(), "http://"+addr+"/l", map[string]string{"X-Fault": "lossy"})
		if r.status != 429 || r.header.Get("Retry-After") != "7" || r.header.Get("X-Why") != "quota" || !strings.Contains(string(r.body), "LOSS_INJECTED") {
			t.Errorf("got %d %v %s", r.status, r.header, r.body)
		}
	})
	t.Run("bandwidth paces a forwarded and a mocked body", func(t *testing.T) {
		for _, c := range []struct {
			path, fault string
			size        int
		}{{"/big", "paced", 1 << 20}, {"/mock/paced", "", 1 << 20}} {
			var hdr []string
			if c.fault != "" {
				hdr = []string{"X-Fault", c.fault}
			}
			w := rawRead(t, addr, c.path, hdr...)
			want := time.Duration(float64(c.size) / (256 << 10) * float64(time.Second))
			if len(w.body()) != c.size || w.end != io.EOF {
				t.Fatalf("%s: %d bytes, ended %v", c.path, len(w.body()), w.end)
			}
			// The body's pace, from its first byte: within 5 %.
			paced := w.took - w.firstByte
			if paced < want*95/100 || paced > want*105/100 {
				t.Errorf("%s: %d bytes in %v, want %v ± 5 %%", c.path, c.size, paced, want)
			}
			// Sent as it goes, never held whole first.
			if w.firstByte > 500*time.Millisecond {
				t.Errorf("%s: the first byte took %v", c.path, w.firstByte)
			}
		}
	})

	// Every fault that fired is named: the request line, the metric, the
	// journal.
	lines := map[string]map[string]any{}
	for _, l := range p.jsonLines() {
		if isRequest(l) {
			lines[fmt.Sprint(l["proxy"], l["path"])] = l
		}
	}
	for key, want := range map[string]struct {
		fault  string
		status json.Number
	}{
		"cut-request/r1": {"abort", "444"}, "cut-response/r2": {"abort", "444"}, "cut-body/data": {"abort", "200"},
		"hang/h1": {"hang", "444"}, "lossy/l": {"loss", "429"}, "paced/big": {"", "200"}, "plain/mock/plain": {"", "200"},
	} {
		l := lines[key]
		if l == nil || l["fault"] != want.fault || l["status"] != want.status {
			t.Errorf("request line of %s: %v, want fault %q status %v", key, l, want.fault, want.status)
		}
	}
	metrics := string(mustGet(t, newClient(), "http://"+admin+"/metrics", nil).body)
	for _, m := range []string{
		`doppel_faults_total{fault="abort",proxy="cut-body"} 1`,
		`doppel_faults_total{fault="hang",proxy="hang"} 1`,
		`doppel_faults_total{fault="bandwidth",proxy="paced"} 1`,
		`doppel_faults_total{fault="loss",proxy="lossy"} 1`,
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	var journal struct {
		Requests []struct {
			Proxy string `json:"proxy"`
			Path  string `json:"path"`
			Fault struct {
				Abort *string `json:"abort"`
				Hang  bool    `json:"hang"`
			} `json:"fault"`
		} `json:"requests"`
	}
	listed := mustGet(t, newClient(), "http://"+admin+"/api/v1/requests", nil)
	if err := json.Unmarshal(listed.body, &journal); err != nil || listed.status != 200 {
		t.Fatalf("the journal: %d %s", listed.status, listed.body)
	}
	seen := map[string]string{}
	for _, e := range journal.Requests {
		v := fmt.Sprint(e.Fault.Hang)
		if e.Fault.Abort != nil {
			v = *e.Fault.Abort
		}
		seen[e.Proxy+e.Path] = v
	}
	for key, want := range map[string]string{"cut-request/r1": "request", "cut-response/r2": "response", "cut-body/data": "body", "hang/h1": "true", "paced/big": "false"} {
		if seen[key] != want {
			t.Errorf("journal of %s: %q, want %q", key, seen[key], want)
		}
	}
}

// TestClientsLeavingASlowBodyFreeEverything: clients that give up on a
// trickling body leave nothing running.
func TestClientsLeavingASlowBodyFreeEverything(t *testing.T) {
	t.Parallel()
	up, _ := faultUpstream(t)
	cfg := serveConfig(t, t.TempDir(), 0, 0, faultProxies(up))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(t, p)
	before := goroutines(t, admin)
	const n = 50
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: d\r\nX-Fault: trickle\r\n\r\n")
	}
	for _, c := range conns {
		// The headers and the first slice, then the client gives up.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAtLeast(c, make([]byte, 256), 200); err != nil {
			t.Fatal(err)
		}
	}
	if g := goroutines(t, admin); g < before+n {
		t.Fatalf("%d goroutines with %d slow bodies, from %d", g, n, before)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for goroutines(t, admin) > before+5 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if g := goroutines(t, admin); g > before+5 {
		t.Errorf("%d goroutines after the clients left, from %d", g, before)
	}
}

// adminAddrOf is where the process's admin API listens.
func adminAddrOf(t testing.TB, p *proc) string {
	t.Helper()
	return lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
}

// TestHangsCostAParkedGoroutine: hanging requests hold a goroutine each
// and little memory; clients that leave free everything at once, and
// each hang is logged as its client leaving.
func TestHangsCostAParkedGoroutine(t *testing.T) {
	t.Parallel()
	const n = 500
	perHang, rssBefore := holdHangs(t, n, hungPath, hangLogged, 0, 1)
	// 5,000 at once must stay under 100 MiB (BenchmarkFiveThousandHangs
	// measures it).
	if total := perHang*5000 + float64(rssBefore); total > 100<<20 {
		t.Errorf("%.1f KiB per hang: 5,000 would be %.0f MiB", perHang/1024, total/(1<<20))
	}
}

// BenchmarkFiveThousandHangs holds 5,000 hanging requests at once and
// reports Doppel's resident memory then: go test ./cmd/doppel -run '^$'
// -bench FiveThousandHangs -benchtime 1x.
func BenchmarkFiveThousandHangs(b *testing.B) {
	for b.Loop() {
		perHang, rssBefore := holdHangs(b, 5000, hungPath, hangLogged, 0, 1)
		b.ReportMetric((perHang*5000+float64(rssBefore))/(1<<20), "MiB-RSS")
		b.ReportMetric(perHang/1024, "KiB/hang")
	}
}

const (
	hungPath    = "/mock/hung"
	delayedPath = "/mock/delayed"
)

// hangLogged is the line of a hang whose client left.
func hangLogged(l map[string]any) bool {
	return l["path"] == hungPath && l["status"] == json.Number("499") && l["fault"] == "hang"
}

// holdHangs starts Doppel, holds n requests to path (a hang, or a long
// delay), checks that each holds the goroutines it should (each: one for a
// hang, none for a delay, which waits on a timer), lets the clients go and
// checks that everything is freed (after held more, at most) and that each
// request got the line logged says. It returns the resident memory each
// request added, and what there was before.
func holdHangs(tb testing.TB, n int, path string, logged func(map[string]any) bool, held time.Duration, each int) (perHang float64, rssBefore int64) {
	tb.Helper()
	up, _ := faultUpstream(tb)
	cfg := serveConfig(tb, tb.TempDir(), 0, 0, faultProxies(up))
	p, addr := serveUp(tb, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(tb, p)
	before := goroutines(tb, admin)
	rssBefore = procmem.MustResident(tb, p.cmd.Process.Pid)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: d\r\n\r\n"); err != nil {
			tb.Fatal(err)
		}
	}
	// One more connection, answered at once: the listener accepts in
	// order, so once it is answered every held connection has been
	// accepted, and has a goroutine until its request is held.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET /mock/plain HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(c); !bytes.HasSuffix(b, []byte("\r\n\r\nplain")) {
		tb.Fatalf("the request after them: %q", b)
	}
	c.Close()
	// A few of the process's own goroutines come and go meanwhile.
	const slack = 5
	want := before + each*n
	deadline := time.Now().Add(held/2 + 10*time.Second)
	for g := goroutines(tb, admin); (g < want-slack || g > want+slack) && time.Now().Before(deadline); g = goroutines(tb, admin) {
		time.Sleep(50 * time.Millisecond)
	}
	during := goroutines(tb, admin)
	rss := procmem.MustResident(tb, p.cmd.Process.Pid)
	perHang = float64(rss-rssBefore) / float64(n)
	tb.Logf("%d requests to %s held: %d goroutines (from %d), RSS %.1f MiB (from %.1f): %.1f KiB each",
		n, path, during, before, float64(rss)/(1<<20), float64(rssBefore)/(1<<20), perHang/1024)
	if during < want-slack || during > want+slack {
		tb.Fatalf("%d goroutines with %d requests held, from %d: not %d each", during, n, before, each)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	deadline = time.Now().Add(held + 10*time.Second)
	for goroutines(tb, admin) > before+slack && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if g := goroutines(tb, admin); g > before+slack {
		tb.Errorf("%d goroutines after the clients left, from %d", g, before)
	}
	left := 0
	for deadline := time.Now().Add(held + 10*time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = 0
		for _, l := range p.jsonLines() {
			if isRequest(l) && logged(l) {
				left++
			}
		}
		if left >= n || time.Now().After(deadline) {
			break
		}
	}
	if left != n {
		tb.Errorf("%d of %d requests to %s logged as expected", left, n, path)
	}
	return perHang, rssBefore
}

// checkFaultsExample holds examples/faults.yaml to its comments: each
// endpoint fails as they say.
func checkFaultsExample(t *testing.T, root string) {
	s := serveExample(t, root, "faults.yaml", nil)
	addr := strings.TrimPrefix(s.proxy, "http://")
	if w := rawRead(t, addr, "/reset"); !w.reset() || len(w.got) != 0 {
		t.Errorf("/reset: %q, ended %v", w.got, w.end)
	}
	if w := rawRead(t, addr, "/short"); !strings.Contains(w.head(), "Content-Length: 64") || len(w.body()) != 16 || w.end != io.EOF {
		t.Errorf("/short: %q, ended %v", w.got, w.end)
	}
	if w := rawRead(t, addr, "/hang"); len(w.got) != 0 || w.end != io.EOF || w.took < 2*time.Second {
		t.Errorf("/hang: %q after %v, ended %v", w.got, w.took, w.end)
	}
	if w := rawRead(t, addr, "/slow"); len(w.body()) != 8192 || w.took < 1900*time.Millisecond || w.took > 2500*time.Millisecond {
		t.Errorf("/slow: %d bytes in %v", len(w.body()), w.took)
	}
	if r := call(t, "GET", s.proxy+"/busy", ""); r.status != 429 || r.header.Get("Retry-After") != "5" {
		t.Errorf("/busy: %d %v", r.status, r.header)
	}
}

// TestHangsEndWithDoppel: a stopping Doppel ends its hanging requests at
// once, each logged, rather than leaving them to their seconds.
func TestHangsEndWithDoppel(t *testing.T) {
	t.Parallel()
	up, _ := faultUpstream(t)
	cfg := serveConfig(t, t.TempDir(), 0, 0, faultProxies(up))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(t, p)
	before := goroutines(t, admin)
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /mock/hung HTTP/1.1\r\nHost: d\r\n\r\n")
		conns = append(conns, c)
	}
	for goroutines(t, admin) < before+3 {
		time.Sleep(20 * time.Millisecond)
	}
	stopped := time.Now()
	p.signal(syscall.SIGTERM)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("a hang at shutdown: %d bytes, %v", n, err)
		}
	}
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, p)
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("stopping took %v with hangs of 30 s", took)
	}
	n := 0
	for _, l := range p.jsonLines() {
		if isRequest(l) && l["path"] == "/mock/hung" && l["status"] == json.Number("444") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d of 3 hangs logged as 444 at shutdown", n)
	}
}
