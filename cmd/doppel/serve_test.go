package main

// These tests run `doppel serve` as a real subprocess over real sockets and
// check what SPEC §2, §4, §5.4, §11.1, §12 (serve) and §16 (command line)
// promise about it: the startup and shutdown sequence and its exit codes,
// refusing a bad configuration or flag, the request log lines, and clients
// that misbehave. Upstreams are httptest servers in the test process.
//
// The binary is the one TestMain (cli_test.go) builds; its environment is
// cleanEnv() plus what a test sets, as for every other test here.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// msgServing is the startup line's message; its proxy_addr field is
	// the address the proxy listener is bound to.
	msgServing = "doppel started"
	// startTimeout bounds how long a process may take to start serving.
	startTimeout = 15 * time.Second
	// exitTimeout bounds how long a process may take to exit where the test
	// expects it to exit soon (not where exiting fast is the point).
	exitTimeout = 15 * time.Second
)

// proc is one running `doppel serve`. Its stdout is read line by line as it
// comes; its stderr is collected for after the exit.
type proc struct {
	t   testing.TB
	cmd *exec.Cmd

	mu     sync.Mutex
	lines  []string      // stdout, one entry a line, without the newline
	raw    bytes.Buffer  // stdout exactly as written
	grew   chan struct{} // closed (and replaced) whenever a line arrives
	stderr lockedBuffer

	exited chan struct{} // closed once the process has been waited for
	code   int           // exit code; -1 when ended by a signal

	readyAt  time.Time // when the test saw it serving
	signaled bool      // whether signal has been called
}

// signalSettle is how long signal waits after the process was seen serving
// before it sends the first signal. serve installs its signal handler
// before it can be seen serving (TestServeSignalRightAfterStartup pins
// that), so no wait is needed for correctness; the settle only lets each
// test's own requests start first.
const signalSettle = 300 * time.Millisecond

// lockedBuffer is a bytes.Buffer that exec's copying goroutine and the test
// may use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProc starts the binary with inv's arguments, environment and working
// directory, and makes sure it is gone when the test ends.
func startProc(t testing.TB, inv invocation) *proc {
	t.Helper()
	dir := inv.dir
	if dir == "" {
		dir = t.TempDir()
	}
	p := &proc{t: t, grew: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(doppelBin, inv.args...)
	p.cmd.Dir = dir
	p.cmd.Env = cleanEnv()
	for k, v := range inv.env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting doppel %q: %v", inv.args, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				p.add(line)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		// Wait closes the pipe, so it must come after the last read.
		<-readDone
		err := p.cmd.Wait()
		code := 0
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				code = -2
			}
		}
		p.code = code // read only after exited is closed
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.hasExited() {
			return
		}
		_ = p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("doppel (pid %d) did not go away after being killed", p.cmd.Process.Pid)
		}
	})
	return p
}

func (p *proc) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.raw.WriteString(line)
	p.lines = append(p.lines, strings.TrimSuffix(line, "\n"))
	close(p.grew)
	p.grew = make(chan struct{})
}

func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stdoutLines is a copy of what stdout carried so far.
func (p *proc) stdoutLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// String is everything the process wrote, for failure messages.
func (p *proc) String() string {
	state := "still running"
	if p.hasExited() {
		state = fmt.Sprintf("exit %d", p.code)
	}
	return fmt.Sprintf("%s\n--- stdout:\n%s--- stderr:\n%s", state, p.stdout(), p.stderr.String())
}

// waitLine waits until a stdout line satisfies match and returns it. It
// fails the test when the process exits or timeout passes first.
func (p *proc) waitLine(what string, timeout time.Duration, match func(string) bool) string {
	p.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		p.mu.Lock()
		lines, grew := p.lines[seen:], p.grew
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		select {
		case <-grew:
		case <-p.exited:
			// Lines read before the exit are all in by now.
			for _, l := range p.stdoutLines()[seen:] {
				if match(l) {
					return l
				}
			}
			p.t.Fatalf("doppel exited before logging %s:\n%s", what, p)
		case <-deadline.C:
			p.t.Fatalf("doppel did not log %s within %v:\n%s", what, timeout, p)
		}
	}
}

// waitServing waits for the startup line and returns the proxy listener's
// address from it; the line may be JSON or slog text.
func (p *proc) waitServing() string {
	p.t.Helper()
	line := p.waitLine("the startup line", startTimeout, func(l string) bool {
		return lineMsg(l) == msgServing
	})
	p.readyAt = time.Now()
	addr := lineField(line, "proxy_addr")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.t.Fatalf("the startup line has no usable proxy_addr (%q): %s", addr, line)
	}
	return addr
}

// signal sends sig to the process, the first time no sooner than
// signalSettle after it was seen serving.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	p.settle()
	p.signalNow(sig)
}

// settle waits, before the first signal, until signalSettle has passed
// since the process was seen serving.
func (p *proc) settle() {
	if !p.signaled && !p.readyAt.IsZero() {
		time.Sleep(time.Until(p.readyAt.Add(signalSettle)))
	}
	p.signaled = true
}

// signalNow sends sig to the process at once.
func (p *proc) signalNow(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("sending %v: %v\n%s", sig, err, p)
	}
}

// waitExit waits for the process to exit and returns its exit code (-1 when
// a signal ended it); it fails the test after timeout.
func (p *proc) waitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("doppel did not exit within %v:\n%s", timeout, p)
		return 0
	}
}

// jsonLines decodes every stdout line as tracing's JSON (timestamp, level,
// fields, target); a line that is not one fails the test. Each comes back
// as its fields (the message under "message") beside its level, target
// and timestamp.
func (p *proc) jsonLines() []map[string]any {
	p.t.Helper()
	out := p.stdout()
	if out != "" && !strings.HasSuffix(out, "\n") {
		p.t.Errorf("stdout ends in the middle of a line:\n%s", p)
	}
	var objs []map[string]any
	for i, l := range p.stdoutLines() {
		obj, err := decodeLine(l)
		if err != nil {
			p.t.Errorf("stdout line %d is not one line of tracing's JSON (%v): %q", i+1, err, l)
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

// lineLayout is the layout of a JSON line, tracing's.
var lineLayout = []string{"fields", "level", "target", "timestamp"}

// decodeLine reads a line of tracing's JSON into its fields beside its
// level, target and timestamp.
func decodeLine(l string) (map[string]any, error) {
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(l))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	if obj == nil || dec.More() {
		return nil, errors.New("not one object")
	}
	if got := sortedMapKeys(obj); !slices.Equal(got, lineLayout) {
		return nil, fmt.Errorf("keys %v, want %v", got, lineLayout)
	}
	fields, ok := obj["fields"].(map[string]any)
	if !ok {
		return nil, errors.New("fields is not an object")
	}
	if _, ok := fields["message"].(string); !ok {
		return nil, errors.New("fields has no message")
	}
	for _, k := range lineLayout[1:] {
		fields[k] = obj[k]
	}
	return fields, nil
}

// The request line's messages, one a branch, as Doppel 1.1 has them.
const (
	msgProxied  = "request proxied"
	msgRejected = "request rejected"
	msgFailed   = "upstream failed"
	msgMocked   = "request mocked"
	msgDropped  = "request dropped"
)

// isRequest says whether a decoded line is a request line.
func isRequest(l map[string]any) bool {
	switch l["message"] {
	case msgProxied, msgRejected, msgFailed, msgMocked, msgDropped:
		return l["target"] == "doppel/internal/proxy"
	}
	return false
}

// isRequestLine says whether a JSON or text line is a request line.
func isRequestLine(line string) bool {
	switch lineMsg(line) {
	case msgProxied, msgRejected, msgFailed, msgMocked, msgDropped:
		return lineField(line, "target") == "doppel/internal/proxy" || !json.Valid([]byte(line))
	}
	return false
}

// lineMsg is the message of a JSON or text line ("" when it has none).
func lineMsg(line string) string {
	if obj, err := decodeLine(line); err == nil {
		return obj["message"].(string)
	}
	if m := textLine.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// textLine is tracing's text line: the timestamp, the level right-aligned
// in five, the target, then the message and the fields.
var textLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z +(?:TRACE|DEBUG|INFO|WARN|ERROR) [^ :]+: (.*?)(?: [A-Za-z_.]+=.*)?$`)

var textField = regexp.MustCompile(`(?:^| )([A-Za-z_.]+)=("(?:[^"\\]|\\.)*"|\S*)`)

// lineField reads a string field of a JSON line (or its level, target or
// timestamp), or a key=value field of a text line.
func lineField(line, key string) string {
	if obj, err := decodeLine(line); err == nil {
		s, _ := obj[key].(string)
		return s
	}
	for _, m := range textField.FindAllStringSubmatch(line, -1) {
		if m[1] != key {
			continue
		}
		if strings.HasPrefix(m[2], `"`) {
			if s, err := strconv.Unquote(m[2]); err == nil {
				return s
			}
		}
		return m[2]
	}
	return ""
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for len(ports) < n {
		ports = append(ports, reservePort(t))
	}
	return ports
}

// reservePort is a loopback port no other test of any package takes
// until t ends, and that no connection's own end takes meanwhile: one
// below the kernel's range of ephemeral ports (those it gives to
// outgoing connections and to listeners on port 0), each held by a lock
// file that every test process honours, and free to bind when chosen.
// A port chosen on port 0 and closed could be taken by any connection
// before Doppel binds it.
func reservePort(t testing.TB) int {
	t.Helper()
	lo := ephemeralLow()
	dir := filepath.Join(os.TempDir(), "doppel-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const first = 10000
	span := lo - first
	if span < 1000 {
		t.Fatalf("the ephemeral ports begin at %d: no range below them to reserve ports in", lo)
	}
	start := rand.IntN(span)
	for i := range span {
		port := first + (start+i)%span
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test holds it
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close() // something else listens there
			continue
		}
		ln.Close()
		t.Cleanup(func() { f.Close() })
		return port
	}
	t.Fatalf("no port from %d to %d could be reserved", first, lo-1)
	return 0
}

// ephemeralLow is the first of the kernel's ephemeral ports (32768
// unless the machine says otherwise).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 32768
	}
	return lo
}

// serveConfig writes dir/main.yaml: both listeners on 127.0.0.1 (server
// port, then admin port; zero picks a free one), the template directory
// and the control socket inside dir, then body (logging, proxies, ...).
func serveConfig(t testing.TB, dir string, serverPort, adminPort int, body string) string {
	t.Helper()
	free := freePorts(t, 2)
	if serverPort == 0 {
		serverPort = free[0]
	}
	if adminPort == 0 {
		adminPort = free[1]
	}
	doc := fmt.Sprintf(`server:
  host: 127.0.0.1
  port: %d
admin:
  host: 127.0.0.1
  port: %d
templates:
  dir: %s
control:
  socket: %s
`, serverPort, adminPort,
		strconv.Quote(filepath.Join(dir, "templates")),
		strconv.Quote(filepath.Join(dir, "doppel.sock")))
	return writeFile(t, dir, "main.yaml", doc+body)
}

// proxyYAML is one proxies entry; header == "" makes it the default.
func proxyYAML(name, url, header string) string {
	s := fmt.Sprintf("  - name: %s\n    type: http\n    url: %s\n", name, url)
	if header != "" {
		s += fmt.Sprintf("    resolve:\n      type: header\n      header: %s\n", header)
	}
	return s
}

// serveUp starts `doppel serve --config cfg --proxy-addr 127.0.0.1:0
// --admin-addr 127.0.0.1:0` plus extra arguments (a later flag wins) and
// returns it with its proxy listener's address. Both listeners take ports
// the system picks: a port chosen ahead (serveConfig's) may be taken by
// the time serve binds it, by any process, this one's proxy listener too.
func serveUp(t testing.TB, cfg string, env map[string]string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, extra...)
	p := startProc(t, invocation{args: args, env: env})
	return p, p.waitServing()
}

// upstream is an httptest server closed when the test ends.
func upstream(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newClient never reuses connections and never goes through a proxy from
// the environment.
func newClient() *http.Client {
	return &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// get sends GET url with the given headers and reads the whole answer.
func get(c *http.Client, url string, header map[string]string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// mustGet is get that fails the test on a transport error.
func mustGet(t testing.TB, c *http.Client, url string, header map[string]string) response {
	t.Helper()
	r, err := get(c, url, header)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, p *proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			p.readyAt = time.Now()
			return
		}
		if p.hasExited() || time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s (%v):\n%s", addr, err, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeGracefulShutdown: on SIGTERM the listener closes at once, the
// request in flight still completes, then the process exits 0 (SPEC §12).
func TestServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	received := make(chan struct{})
	var once sync.Once
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(received) })
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	})
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("slow", up.URL, ""))
	p, addr := serveUp(t, cfg, nil)
	p.settle() // so that the signal goes as soon as the upstream has the request

	type outcome struct {
		r   response
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := get(newClient(), "http://"+addr+"/slow", nil)
		done <- outcome{r, err}
	}()
	select {
	case <-received:
	case o := <-done:
		t.Fatalf("the request ended before reaching the upstream: %v, status %d\n%s", o.err, o.r.status, p)
	case <-time.After(10 * time.Second):
		t.Fatalf("the upstream never received the request:\n%s", p)
	}

	p.signal(syscall.SIGTERM)
	p.waitLine("the shutting-down line", 10*time.Second, func(l string) bool {
		return strings.HasPrefix(lineMsg(l), "shutdown signal received")
	})

	// The listener closes while the request is still being drained: a new
	// connection is refused before the process has exited.
	refused := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			if p.hasExited() {
				t.Fatalf("no refusal was seen before the process exited (last: %v):\n%s", err, p)
			}
			refused = true
			break
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	if !refused {
		t.Fatalf("the proxy listener still accepts connections after SIGTERM:\n%s", p)
	}

	var o outcome
	select {
	case o = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the in-flight request never completed:\n%s", p)
	}
	if o.err != nil {
		t.Fatalf("the in-flight request failed: %v\n%s", o.err, p)
	}
	if o.r.status != http.StatusOK || !bytes.Equal(o.r.body, body) {
		t.Fatalf("in-flight request: status %d, %d body bytes; want 200 and all %d:\n%s",
			o.r.status, len(o.r.body), len(body), p)
	}
	if o.r.header.Get("X-Request-Id") == "" {
		t.Errorf("the in-flight answer has no X-Request-Id")
	}

	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("want exit 0 after a graceful shutdown:\n%s", p)
	}
	msgs := msgsOf(p.stdoutLines())
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "shutdown signal received") }) ||
		!slices.Contains(msgs, "drained cleanly") {
		t.Errorf("stdout must carry the \"shutdown signal received\" and \"drained cleanly\" lines:\n%s", p)
	}
	if i, j := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "shutdown signal received") }),
		slices.Index(msgs, "drained cleanly"); i > j {
		t.Errorf("\"drained cleanly\" is logged before \"shutdown signal received\":\n%s", p)
	}
}

func msgsOf(lines []string) []string {
	var msgs []string
	for _, l := range lines {
		msgs = append(msgs, lineMsg(l))
	}
	return msgs
}

// TestServeSecondSignal: a second signal during the drain exits at once,
// with a failure code, without waiting for the request in flight.
func TestServeSecondSignal(t *testing.T) {
	t.Parallel()
	received := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(received) })
		select {
		case <-time.After(20 * time.Second):
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before up.Close, which waits for handlers
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("blocked", up.URL, ""))
	p, addr := serveUp(t, cfg, nil)

	go func() { _, _ = get(newClient(), "http://"+addr+"/block", nil) }()
	select {
	case <-received:
	case <-time.After(10 * time.Second):
		t.Fatalf("the upstream never received the request:\n%s", p)
	}
	p.signal(syscall.SIGTERM)
	p.waitLine("the shutting-down line", 10*time.Second, func(l string) bool {
		return strings.HasPrefix(lineMsg(l), "shutdown signal received")
	})
	sent := time.Now()
	p.signal(syscall.SIGINT)
	code := p.waitExit(3 * time.Second)
	took := time.Since(sent)
	if code == wantOK {
		t.Fatalf("a second signal must exit with a failure code, got exit 0:\n%s", p)
	}
	t.Logf("exit %d %v after the second signal", code, took.Round(time.Millisecond))
}

// TestServeInterruptIdle: SIGINT with nothing in flight exits 0 promptly.
func TestServeInterruptIdle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("idle", "http://127.0.0.1:9", ""))
	p, _ := serveUp(t, cfg, nil)
	p.signal(syscall.SIGINT)
	if code := p.waitExit(5 * time.Second); code != wantOK {
		t.Fatalf("want exit 0 on SIGINT:\n%s", p)
	}
	if !slices.Contains(msgsOf(p.stdoutLines()), "drained cleanly") {
		t.Errorf("stdout must carry the \"drained cleanly\" line:\n%s", p)
	}
}

// TestServeSignalRightAfterStartup: once serve has said it is serving, a
// SIGTERM is a graceful shutdown (exit 0), never a kill, however soon it
// comes.
func TestServeSignalRightAfterStartup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("early", "http://127.0.0.1:9", ""))
	for i := range 20 {
		p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
		p.waitServing()
		p.signalNow(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("run %d: SIGTERM right after the startup line: want exit 0:\n%s", i+1, p)
		}
	}
}

// TestServeInvalidConfiguration: serve refuses a document with violations,
// listing every one with its path on stderr, and binds nothing.
func TestServeInvalidConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePorts(t, 1)[0]
	cfg := serveConfig(t, dir, port, port, `proxies:
  - name: one
    type: http
    url: http://127.0.0.1:9000
    latency:
      percentage: 0.5
      min: 2
      max: 1
  - name: one
    type: http
    url: http://127.0.0.1:9001
    resolve:
      type: header
      header: X-Backend
`)
	// No --proxy-addr: the document's own server port is the one to bind.
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	if code := p.waitExit(exitTimeout); code != wantRejected {
		t.Fatalf("want exit 1 for an invalid configuration:\n%s", p)
	}
	stderr := p.stderr.String()
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^admin\.port: \S.*$`),
		regexp.MustCompile(`(?m)^proxies\[0\]\.latency\.min: proxy .[a-z]+.: min must be <= max: min is [0-9.]+ s, max is [0-9.]+ s( \(line \d+\))?$`),
		regexp.MustCompile(`(?m)^proxies\[1\]\.name: \S.*$`),
	} {
		if !re.MatchString(stderr) {
			t.Errorf("stderr must have a line matching %s:\n%s", re, p)
		}
	}
	if strings.Contains(stderr, "Usage:") {
		t.Errorf("an invalid configuration is not a usage error:\n%s", p)
	}
	if slices.Contains(msgsOf(p.stdoutLines()), msgServing) {
		t.Errorf("serve started despite the violations:\n%s", p)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on the configured server port %d", port)
	}
}

// TestServeBindFailure: a proxy address already taken fails with the OS
// error and exit 1 (SPEC §16).
func TestServeBindFailure(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("taken", "http://127.0.0.1:9", ""))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", ln.Addr().String()}})
	if code := p.waitExit(exitTimeout); code != wantRejected {
		t.Fatalf("want exit 1 when the listener cannot bind:\n%s", p)
	}
	if !strings.Contains(p.stderr.String(), "address already in use") {
		t.Errorf("stderr must carry the OS error \"address already in use\":\n%s", p)
	}
	if !strings.Contains(p.stderr.String(), ln.Addr().String()) {
		t.Errorf("stderr should name the address %s:\n%s", ln.Addr(), p)
	}
}

// TestServeFlags: --workers, DOPPEL_WORKERS and --proxy-addr are checked
// before anything starts (exit 2 with the usage), and a good value works.
func TestServeFlags(t *testing.T) {
	t.Parallel()
	usageCases := []struct {
		name    string
		args    []string
		env     map[string]string
		mention string
	}{
		{name: "workers 0", args: []string{"--workers", "0"}, mention: "--workers"},
		{name: "workers -1", args: []string{"--workers", "-1"}, mention: "--workers"},
		{name: "workers not a number", args: []string{"--workers", "two"}, mention: "--workers"},
		{name: "DOPPEL_WORKERS not a number", env: map[string]string{"DOPPEL_WORKERS": "abc"}, mention: "DOPPEL_WORKERS"},
		{name: "DOPPEL_WORKERS 0", env: map[string]string{"DOPPEL_WORKERS": "0"}},
		{name: "proxy-addr without a port", args: []string{"--proxy-addr", "nonsense"}, mention: "--proxy-addr"},
		{name: "DOPPEL_PROXY_ADDR without a port", env: map[string]string{"DOPPEL_PROXY_ADDR": "nonsense"}},
	}
	for _, tc := range usageCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("flags", "http://127.0.0.1:9", ""))
			// A good --proxy-addr comes first, so that only the case's own
			// value can be what is wrong.
			args := []string{"serve", "--config", cfg}
			if !slices.Contains(tc.args, "--proxy-addr") && tc.env["DOPPEL_PROXY_ADDR"] == "" {
				args = append(args, "--proxy-addr", "127.0.0.1:0")
			}
			p := startProc(t, invocation{args: append(args, tc.args...), env: tc.env})
			if code := p.waitExit(exitTimeout); code != wantUsage {
				t.Fatalf("want exit 2 (usage):\n%s", p)
			}
			if !strings.Contains(p.stderr.String(), "Usage:") {
				t.Errorf("stderr must carry the usage:\n%s", p)
			}
			if tc.mention != "" && !strings.Contains(p.stderr.String(), tc.mention) {
				t.Errorf("stderr must mention %q:\n%s", tc.mention, p)
			}
			if p.stdout() != "" {
				t.Errorf("stdout must stay empty on a usage error:\n%s", p)
			}
		})
	}

	workerCases := []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{name: "workers 1", args: []string{"--workers", "1"}, want: 1},
		{name: "DOPPEL_WORKERS 3", env: map[string]string{"DOPPEL_WORKERS": "3"}, want: 3},
		{name: "flag beats a bad DOPPEL_WORKERS", args: []string{"--workers", "1"}, env: map[string]string{"DOPPEL_WORKERS": "abc"}, want: 1},
	}
	for _, tc := range workerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("flags", "http://127.0.0.1:9", ""))
			p, _ := serveUp(t, cfg, tc.env, tc.args...)
			line := p.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing })
			var startup struct {
				Workers *int `json:"workers"`
			}
			var fields struct {
				Fields json.RawMessage `json:"fields"`
			}
			if err := json.Unmarshal([]byte(line), &fields); err != nil || json.Unmarshal(fields.Fields, &startup) != nil || startup.Workers == nil || *startup.Workers != tc.want {
				t.Errorf("the startup line must say \"workers\":%d: %s", tc.want, line)
			}
			p.signal(syscall.SIGTERM)
			if code := p.waitExit(exitTimeout); code != wantOK {
				t.Fatalf("want exit 0:\n%s", p)
			}
		})
	}
}

// The keys of a request line (SPEC §11.1) besides the layout's own.
var (
	layoutKeys       = []string{"timestamp", "level", "target", "message"}
	requestLineKeys  = []string{"request_id", "proxy", "method", "path", "status", "duration_ms", "upstream_contacted", "loss_injected", "latency_injected_ms", "fault"}
	upstreamLineKeys = []string{"upstream_status", "upstream_duration_ms"}
)

func sortedMapKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func keySet(groups ...[]string) []string {
	var all []string
	for _, g := range groups {
		all = append(all, g...)
	}
	slices.Sort(all)
	return all
}

// TestServeRequestLogs: with format json, stdout is nothing but JSON lines,
// and each request gets one line with exactly the documented keys.
func TestServeRequestLogs(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "from upstream")
	})
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "logging:\n  level: info\n  format: json\nproxies:\n"+
		proxyYAML("api", up.URL, "X-Backend"))
	p, addr := serveUp(t, cfg, nil)
	c := newClient()
	base := "http://" + addr

	type sent struct {
		path      string // what the line's path must be
		forwarded bool
		requestID string // from the answer
	}
	var reqs []sent
	for _, tc := range []struct {
		target    string
		path      string
		header    map[string]string
		forwarded bool
	}{
		{target: "/items/42?token=secret&page=2", path: "/items/42", header: map[string]string{"X-Backend": "api"}, forwarded: true},
		{target: "/other?x=1", path: "/other", header: map[string]string{"X-Backend": "api", "X-Request-Id": "client-chosen-id"}, forwarded: true},
		{target: "/nowhere?q=%3Fstill", path: "/nowhere"},
	} {
		r := mustGet(t, c, base+tc.target, tc.header)
		want := http.StatusAccepted
		if !tc.forwarded {
			want = http.StatusNotFound
		}
		if r.status != want {
			t.Fatalf("GET %s: status %d, want %d: %s", tc.target, r.status, want, r.body)
		}
		id := r.header.Get("X-Request-Id")
		if id == "" {
			t.Errorf("GET %s: no X-Request-Id on the answer", tc.target)
		}
		if want := tc.header["X-Request-Id"]; want != "" && id != want {
			t.Errorf("GET %s: X-Request-Id %q, want the client's %q", tc.target, id, want)
		}
		reqs = append(reqs, sent{path: tc.path, forwarded: tc.forwarded, requestID: id})
	}

	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("want exit 0:\n%s", p)
	}
	var requestLines []map[string]any
	for _, obj := range p.jsonLines() {
		if isRequest(obj) {
			requestLines = append(requestLines, obj)
		}
	}
	if len(requestLines) != len(reqs) {
		t.Fatalf("want %d request lines, one per request, got %d:\n%s", len(reqs), len(requestLines), p)
	}
	for _, want := range reqs {
		i := slices.IndexFunc(requestLines, func(l map[string]any) bool { return l["request_id"] == want.requestID })
		if i < 0 {
			t.Errorf("no request line has request_id %q:\n%s", want.requestID, p)
			continue
		}
		line := requestLines[i]
		// A Doppel error's line carries its code.
		keys := keySet(layoutKeys, requestLineKeys, []string{"error_code"})
		if want.forwarded {
			keys = keySet(layoutKeys, requestLineKeys, upstreamLineKeys)
		}
		if got := sortedMapKeys(line); !slices.Equal(got, keys) {
			t.Errorf("request line keys\n got %v\nwant %v\nline: %v", got, keys, line)
		}
		checkField(t, line, "level", "INFO")
		checkField(t, line, "target", "doppel/internal/proxy")
		checkField(t, line, "method", "GET")
		checkField(t, line, "path", want.path)
		if path, _ := line["path"].(string); strings.Contains(path, "?") {
			t.Errorf("path %q carries the query string", path)
		}
		checkField(t, line, "loss_injected", false)
		checkNumber(t, line, "latency_injected_ms", func(f float64) bool { return f == 0 })
		checkNumber(t, line, "duration_ms", func(f float64) bool { return f >= 0 })
		for _, k := range []string{"duration_ms", "upstream_duration_ms", "latency_injected_ms"} {
			if n, ok := line[k].(json.Number); ok && strings.ContainsAny(string(n), ".eE") {
				t.Errorf("%s = %s is not whole milliseconds; line: %v", k, n, line)
			}
		}
		if want.forwarded {
			checkField(t, line, "message", "request proxied")
			checkField(t, line, "proxy", "api")
			checkNumber(t, line, "status", func(f float64) bool { return f == http.StatusAccepted })
			checkField(t, line, "upstream_contacted", true)
			checkNumber(t, line, "upstream_status", func(f float64) bool { return f == http.StatusAccepted })
			checkNumber(t, line, "upstream_duration_ms", func(f float64) bool { return f >= 0 })
		} else {
			checkField(t, line, "message", "request rejected")
			checkField(t, line, "proxy", "")
			checkField(t, line, "error_code", "PROXY_NOT_RESOLVED")
			checkNumber(t, line, "status", func(f float64) bool { return f == http.StatusNotFound })
			checkField(t, line, "upstream_contacted", false)
		}
	}
	if strings.Contains(p.stdout(), "secret") {
		t.Errorf("the query string leaked into the logs:\n%s", p)
	}
}

func checkField(t *testing.T, line map[string]any, key string, want any) {
	t.Helper()
	if got, ok := line[key]; !ok || got != want {
		t.Errorf("%s = %#v, want %#v; line: %v", key, got, want, line)
	}
}

func checkNumber(t *testing.T, line map[string]any, key string, ok func(float64) bool) {
	t.Helper()
	n, isNum := line[key].(json.Number)
	if !isNum {
		t.Errorf("%s = %#v, want a number; line: %v", key, line[key], line)
		return
	}
	f, err := n.Float64()
	if err != nil || !ok(f) {
		t.Errorf("%s = %s is not what it should be; line: %v", key, n, line)
	}
}

// TestServeLogSettings: DOPPEL_LOG overrides logging.level unless blank,
// and format text writes slog's key=value lines.
func TestServeLogSettings(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})

	for _, env := range []map[string]string{{"DOPPEL_LOG": "error"}, {"RUST_LOG": "error"}, {"RUST_LOG": "hyper=info"}, {"RUST_LOG": "info", "DOPPEL_LOG": "error"}} {
		t.Run(fmt.Sprint(env)+" silences the info lines", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "logging:\n  level: info\nproxies:\n"+proxyYAML("api", up.URL, ""))
			// No startup line to read the address from: pick it here.
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(t, 1)[0]))
			p := startProc(t, invocation{
				args: []string{"serve", "--config", cfg, "--proxy-addr", addr},
				env:  env,
			})
			waitListening(t, p, addr)
			if r := mustGet(t, newClient(), "http://"+addr+"/x", nil); r.status != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", r.status, r.body)
			}
			p.signal(syscall.SIGTERM)
			if code := p.waitExit(exitTimeout); code != wantOK {
				t.Fatalf("want exit 0:\n%s", p)
			}
			for _, obj := range p.jsonLines() {
				if isRequest(obj) || obj["level"] == "INFO" {
					t.Errorf("%v must silence info lines, got: %v", env, obj)
				}
			}
		})
	}

	// A filter that does not parse stops the start, naming its variable.
	for _, tc := range []struct{ name, value string }{
		{"RUST_LOG", "not a valid directive==="},
		{"RUST_LOG", "doppel=loud"},
		{"DOPPEL_LOG", "loud"},
	} {
		t.Run(tc.name+"="+tc.value+" fails the start", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("api", up.URL, ""))
			r := doppel(t, invocation{args: []string{"serve", "--config", cfg}, env: map[string]string{tc.name: tc.value}})
			if r.code != 1 || !strings.HasPrefix(r.stderr, "doppel: "+tc.name+": ") || r.stdout != "" {
				t.Errorf("want exit 1 and stderr naming %s, got %d:\nstdout: %s\nstderr: %s", tc.name, r.code, r.stdout, r.stderr)
			}
		})
	}

	for _, tc := range []struct {
		name, level string
		env         map[string]string
	}{
		{name: "blank DOPPEL_LOG is ignored", level: "info", env: map[string]string{"DOPPEL_LOG": "  "}},
		{name: "DOPPEL_LOG=info beats level error", level: "error", env: map[string]string{"DOPPEL_LOG": "info"}},
		{name: "blank RUST_LOG is ignored", level: "info", env: map[string]string{"RUST_LOG": " "}},
		{name: "RUST_LOG=info beats level error", level: "error", env: map[string]string{"RUST_LOG": "info"}},
		{name: "RUST_LOG's directive for doppel counts", level: "error", env: map[string]string{"RUST_LOG": "hyper=trace,doppel_proxy=info,warn"}},
		{name: "DOPPEL_LOG beats RUST_LOG", level: "error", env: map[string]string{"DOPPEL_LOG": "info", "RUST_LOG": "error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "logging:\n  level: "+tc.level+"\nproxies:\n"+proxyYAML("api", up.URL, ""))
			p, addr := serveUp(t, cfg, tc.env)
			if r := mustGet(t, newClient(), "http://"+addr+"/x", nil); r.status != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", r.status, r.body)
			}
			p.signal(syscall.SIGTERM)
			if code := p.waitExit(exitTimeout); code != wantOK {
				t.Fatalf("want exit 0:\n%s", p)
			}
			n := 0
			for _, obj := range p.jsonLines() {
				if isRequest(obj) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("want 1 request line, got %d:\n%s", n, p)
			}
		})
	}

	t.Run("format text", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := serveConfig(t, dir, 0, 0, "logging:\n  format: text\nproxies:\n"+proxyYAML("api", up.URL, ""))
		p, addr := serveUp(t, cfg, nil)
		if r := mustGet(t, newClient(), "http://"+addr+"/t?q=1", nil); r.status != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", r.status, r.body)
		}
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("want exit 0:\n%s", p)
		}
		textLine := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z {1,2}[A-Z]{4,5} doppel/[a-z/]+: \S`)
		requests := 0
		for _, l := range p.stdoutLines() {
			if json.Valid([]byte(l)) {
				t.Errorf("format text wrote a JSON line: %s", l)
			}
			if !textLine.MatchString(l) || strings.Contains(l, "\x1b") {
				t.Errorf("not tracing's text line, without colour: %q", l)
			}
			if isRequestLine(l) {
				requests++
				for _, kv := range []string{"  INFO doppel/internal/proxy: request proxied ", ` proxy="api" `, ` method="GET" `, ` path="/t" `, " status=200 ", " upstream_contacted=true "} {
					if !strings.Contains(l+" ", kv) {
						t.Errorf("request line lacks %q: %s", strings.TrimSpace(kv), l)
					}
				}
			}
		}
		if requests != 1 {
			t.Errorf("want 1 request line, got %d:\n%s", requests, p)
		}
	})
}

// TestServeHostileClients: SPEC §5.4 on the proxy listener.
func TestServeHostileClients(t *testing.T) {
	t.Parallel()
	// The upstream takes far larger headers than Doppel should, so that a
	// 431 can only come from Doppel itself; it counts what reaches it.
	var bigSeen atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Big") != "" {
			bigSeen.Add(1)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	up.Config.MaxHeaderBytes = 16 << 20
	up.Start()
	t.Cleanup(up.Close)

	t.Run("headers over 1 MiB get 431", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("api", up.URL, ""))
		p, addr := serveUp(t, cfg, nil)

		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		// Read the answer while still writing: the server answers as soon as
		// it has seen too much, and closes.
		type answer struct {
			status int
			err    error
		}
		answered := make(chan answer, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answered <- answer{err: err}
				return
			}
			resp.Body.Close()
			answered <- answer{status: resp.StatusCode}
		}()
		big := strings.Repeat("a", 1<<20+64<<10)
		go func() {
			_, _ = io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n")
		}()

		// Another client is served meanwhile.
		if r := mustGet(t, newClient(), "http://"+addr+"/normal", nil); r.status != http.StatusOK {
			t.Errorf("a normal request beside the oversized one: status %d, want 200", r.status)
		}
		select {
		case a := <-answered:
			if a.err != nil || a.status != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("oversized headers: status %d (%v), want 431\n%s", a.status, a.err, p)
			}
		case <-time.After(25 * time.Second):
			t.Fatalf("no answer to the oversized headers")
		}
		if n := bigSeen.Load(); n != 0 {
			t.Errorf("the oversized headers reached the upstream (%d times)", n)
		}

		// Headers below the limit still pass.
		r := mustGet(t, newClient(), "http://"+addr+"/large", map[string]string{"X-Large": strings.Repeat("b", 900<<10)})
		if r.status != http.StatusOK {
			t.Errorf("900 KiB of headers: status %d, want 200", r.status)
		}
	})

	t.Run("incomplete headers are cut off after 10 s", func(t *testing.T) {
		t.Parallel() // takes about 10 s: let it overlap the others
		dir := t.TempDir()
		cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("api", up.URL, ""))
		p, addr := serveUp(t, cfg, nil)

		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		closed := make(chan time.Duration, 1)
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.Copy(io.Discard, conn) // until the server closes
			closed <- time.Since(start)
		}()

		// Meanwhile another client is served, twice, a few seconds apart.
		for range 2 {
			time.Sleep(2 * time.Second)
			if r := mustGet(t, newClient(), "http://"+addr+"/normal", nil); r.status != http.StatusOK {
				t.Errorf("a normal request beside the slow one: status %d, want 200", r.status)
			}
			select {
			case d := <-closed:
				t.Fatalf("the slow client was cut off after %v, before the 10 s allowed", d)
			default:
			}
		}

		select {
		case d := <-closed:
			t.Logf("cut off after %v", d.Round(time.Millisecond))
			if d < 9*time.Second || d > 13*time.Second {
				t.Errorf("the slow client was cut off after %v, want about 10 s", d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the slow client was never cut off:\n%s", p)
		}
	})
}

// TestServeExample: the checked-in example serves, from any working
// directory (its template directory is relative and created there).
func TestServeExample(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	p := startProc(t, invocation{
		args: []string{"serve", "--config", exampleCopy(t), "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "doppel.sock")},
		dir:  wd,
	})
	addr := p.waitServing()
	r, err := get(newClient(), "http://"+addr+"/health", map[string]string{"X-Backend": "shop"})
	if err != nil {
		t.Fatalf("GET /health as shop: %v\n%s", err, p)
	}
	t.Logf("GET /health as shop: %d %s", r.status, r.body)
	if r.header.Get("X-Request-Id") == "" {
		t.Errorf("the answer (status %d) has no X-Request-Id", r.status)
	}
	// Nothing is made before something is written: templates.dir comes
	// with the first template file uploaded.
	if _, err := os.Stat(filepath.Join(wd, "examples", "templates")); err == nil {
		t.Errorf("serving made the template directory %s with nothing to put in it", filepath.Join(wd, "examples", "templates"))
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("want exit 0:\n%s", p)
	}
}

// TestServeAdvisories: a URL with credentials is warned about at startup,
// naming its path, and the password is never shown.
func TestServeAdvisories(t *testing.T) {
	t.Parallel()
	const password = "pw-XYZZY-do-not-show"
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	for _, tc := range []struct {
		name, url string
	}{
		{name: "reachable upstream", url: strings.Replace(up.URL, "://", "://someone:"+password+"@", 1)},
		// A failing exchange logs its error at debug: no password there either.
		{name: "unreachable upstream", url: "http://someone:" + password + "@127.0.0.1:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "logging:\n  level: trace\nproxies:\n"+proxyYAML("creds", tc.url, ""))
			p, addr := serveUp(t, cfg, nil)
			if _, err := get(newClient(), "http://"+addr+"/x?y=1", nil); err != nil {
				t.Fatalf("GET: %v\n%s", err, p)
			}
			p.signal(syscall.SIGTERM)
			if code := p.waitExit(exitTimeout); code != wantOK {
				t.Fatalf("want exit 0:\n%s", p)
			}
			warnings := 0
			for _, obj := range p.jsonLines() {
				if obj["level"] == "WARN" && obj["path"] == "proxies[0].url" {
					warnings++
				}
			}
			if warnings != 1 {
				t.Errorf("want one WARN line naming proxies[0].url, got %d:\n%s", warnings, p)
			}
			if strings.Contains(p.stdout(), password) || strings.Contains(p.stderr.String(), password) {
				t.Errorf("the upstream password leaked:\n%s", p)
			}
		})
	}
}
