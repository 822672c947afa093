package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The hand-written request encoder must write exactly what the handler
// writes for the same line.
func TestRequestJSONMatchesHandler(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 7, 52, 111956879, time.FixedZone("CET", 3600))
	lines := []Exchange{
		{RequestID: "0d7e9a2c", Proxy: "zeta", Method: "GET", Path: "/a/b", Status: 200, Duration: 1234567, UpstreamContacted: true, UpstreamAnswered: true, UpstreamStatus: 201, UpstreamDuration: 999, LatencyWaited: 300 * time.Millisecond},
		{RequestID: "id", Proxy: "", Method: "POST", Path: "/", Status: 404, ErrorCode: "PROXY_NOT_RESOLVED"},
		{RequestID: "id", Proxy: "zeta", Method: "GET", Path: "/", Status: 200, AdminTokenRemoved: "ci"},
		{RequestID: "id", Proxy: "zeta", Method: "GET", Path: "/", Status: 502, ErrorCode: "UPSTREAM_ERROR", UpstreamContacted: true, UpstreamFailed: true,
			UpstreamCause: "connection_refused", UpstreamError: "dial tcp 127.0.0.1:9: connect: connection refused \"q\""},
		{RequestID: "ws", Proxy: "chat", Method: "GET", Path: "/ws", Status: 101, UpstreamContacted: true, UpstreamAnswered: true, UpstreamStatus: 101,
			Tunnel: &Tunnel{Up: 1 << 40, Down: 0, Duration: 2*time.Minute + 3}},
		{RequestID: "id", Proxy: "shop", Mock: "not-found", Method: "GET", Path: "/x", Status: 503, Faults: []string{"loss"}, Duration: 3 * time.Hour},
		{RequestID: "q\"uote\\back\nline\ttab\r\x01\x1f", Proxy: "p", Method: "BREW", Path: "/caf\xe9/\u2028\u2029/é/<&>", Status: 599},
	}
	h := &handler{}
	for i, r := range lines {
		msg, level := r.Event()
		rec := slog.NewRecord(now, level, msg, 0)
		rec.AddAttrs(r.attrs()...)
		want := h.appendRecord(nil, rec, requestTarget)
		got := appendRequestJSON(nil, now, msg, level, &lines[i])
		if string(got) != string(want) {
			t.Errorf("line %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// A request line is tracing's JSON: the message and the keys inside
// fields, whole milliseconds, microseconds in UTC, the proxy's target.
func TestRequestLineLayout(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 7, 52, 111956879, time.FixedZone("CET", 3600))
	r := &Exchange{RequestID: "r1", Proxy: "zeta", Method: "GET", Path: "/a", Status: 200, Duration: 1999 * time.Microsecond,
		UpstreamContacted: true, UpstreamAnswered: true, UpstreamStatus: 200, UpstreamDuration: 1500 * time.Microsecond, LatencyWaited: 250700 * time.Microsecond}
	msg, level := r.Event()
	got := string(appendRequestJSON(nil, now, msg, level, r))
	want := `{"timestamp":"2026-11-29T17:07:52.111956Z","level":"INFO","fields":{"message":"request proxied","request_id":"r1","proxy":"zeta",` +
		`"method":"GET","path":"/a","status":200,"duration_ms":1,"upstream_contacted":true,"upstream_status":200,"upstream_duration_ms":1,` +
		`"loss_injected":false,"latency_injected_ms":250,"fault":""},"target":"doppel/internal/proxy"}` + "\n"
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// Each branch of the request line has Doppel 1.1's message and level.
func TestRequestEvents(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     Exchange
		msg   string
		level slog.Level
	}{
		{"forwarded", Exchange{Proxy: "p", Status: 200, UpstreamContacted: true, UpstreamAnswered: true}, MsgProxied, slog.LevelInfo},
		{"an upstream's 5xx is its answer", Exchange{Proxy: "p", Status: 503, UpstreamContacted: true, UpstreamAnswered: true}, MsgProxied, slog.LevelInfo},
		{"unresolved", Exchange{Status: 404, ErrorCode: "PROXY_NOT_RESOLVED"}, MsgRejected, slog.LevelInfo},
		{"no proxies", Exchange{Status: 503, ErrorCode: "NO_PROXIES_CONFIGURED"}, MsgRejected, slog.LevelInfo},
		{"a path out of the upstream", Exchange{Proxy: "p", Status: 400, ErrorCode: "INVALID_REQUEST_PATH"}, MsgRejected, slog.LevelInfo},
		{"a malformed body", Exchange{Proxy: "p", Status: 400, ErrorCode: "INVALID_REQUEST_BODY", UpstreamContacted: true}, MsgRejected, slog.LevelInfo},
		{"refused", Exchange{Proxy: "p", Status: 502, ErrorCode: "UPSTREAM_ERROR", UpstreamContacted: true, UpstreamFailed: true}, MsgFailed, slog.LevelWarn},
		{"timed out", Exchange{Proxy: "p", Status: 504, ErrorCode: "UPSTREAM_TIMEOUT", UpstreamContacted: true, UpstreamFailed: true}, MsgFailed, slog.LevelWarn},
		{"mocked", Exchange{Proxy: "p", Mock: "m", Status: 200}, MsgMocked, slog.LevelInfo},
		{"a mock that did not render", Exchange{Proxy: "p", Mock: "m", Status: 500, ErrorCode: "TEMPLATE_RENDER_ERROR"}, MsgMocked, slog.LevelInfo},
		{"dropped", Exchange{Proxy: "p", Status: 503, ErrorCode: "LOSS_INJECTED", Faults: []string{"loss"}}, MsgDropped, slog.LevelInfo},
		{"a mock's drop", Exchange{Proxy: "p", Mock: "m", Status: 503, Faults: []string{"latency", "loss"}}, MsgDropped, slog.LevelInfo},
		{"hung", Exchange{Proxy: "p", Status: 444, Faults: []string{"hang"}}, MsgProxied, slog.LevelInfo},
		{"aborted", Exchange{Proxy: "p", Mock: "m", Status: 444, Faults: []string{"abort"}}, MsgProxied, slog.LevelInfo},
	} {
		if msg, level := c.r.Event(); msg != c.msg || level != c.level {
			t.Errorf("%s: %q at %v, want %q at %v", c.name, msg, level, c.msg, c.level)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestAsyncWriterKeepsOrderAndFlushes(t *testing.T) {
	var out lockedBuffer
	w := NewAsyncWriter(&out, 4) // a small queue: writers must wait, not drop
	var want strings.Builder
	for i := range 1000 {
		line := strings.Repeat("x", i%50) + "\n"
		want.WriteString(line)
		_, _ = w.Write([]byte(line))
	}
	w.Flush()
	if out.String() != want.String() {
		t.Fatal("lines were lost or reordered")
	}
	_, _ = w.Write([]byte("after flush\n"))
	w.Flush()
	if !strings.HasSuffix(out.String(), "after flush\n") {
		t.Fatal("a write after a flush was lost")
	}
}

func TestEnvLevel(t *testing.T) {
	cases := []struct {
		configured, doppelLog, rustLog string
		want                           slog.Level
		err                            string
	}{
		{configured: "info", want: slog.LevelInfo},
		{configured: "warn", want: slog.LevelWarn},
		{configured: "info", doppelLog: "error", want: slog.LevelError},
		{configured: "error", rustLog: "debug", want: slog.LevelDebug},
		{configured: "info", doppelLog: "   ", rustLog: "\t", want: slog.LevelInfo},
		{configured: "info", doppelLog: "warn", rustLog: "trace", want: slog.LevelWarn},
		{configured: "info", rustLog: "hyper=debug,doppel_proxy=trace", want: LevelTrace},
		{configured: "info", rustLog: "not a valid directive===", err: "RUST_LOG: "},
		{configured: "info", doppelLog: "loud", err: "DOPPEL_LOG: "},
		{configured: "info", doppelLog: "doppel=debug", err: "DOPPEL_LOG: "},
		{configured: "info", doppelLog: "OFF", want: LevelOff},
		{configured: "info", doppelLog: "debug", rustLog: "x===", want: slog.LevelDebug},
	}
	for _, c := range cases {
		t.Setenv(EnvLog, c.doppelLog)
		t.Setenv(EnvRustLog, c.rustLog)
		got, err := EnvLevel(c.configured)
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want one starting %q", c, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %v, %v; want %v", c, got, err, c.want)
		}
	}
}

func TestParseFilter(t *testing.T) {
	for _, c := range []struct {
		in   string
		want slog.Level
	}{
		{"info", slog.LevelInfo},
		{"WARN", slog.LevelWarn},
		{"off", LevelOff},
		{"4", slog.LevelDebug},
		{"0", LevelOff},
		{"error,doppel_proxy=debug", slog.LevelDebug},
		{"debug,doppel=warn", slog.LevelDebug},
		{"hyper=trace", LevelOff}, // nothing reaches Doppel
		{"loud", LevelOff},        // a target, not a level
		{"hyper=trace,warn", slog.LevelWarn},
		{"doppel_cli", LevelTrace}, // a target alone is at trace
		{"doppel_proxy=", LevelTrace},
		{"doppel_proxy[request{id=1}]=debug,error", slog.LevelDebug},
		{"[span]=trace,info", slog.LevelInfo},
		{"doppel/internal/proxy=debug", slog.LevelDebug},
		{" info , ,", slog.LevelInfo},
	} {
		got, err := ParseFilter(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseFilter(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"doppel=loud", "a b", "=info", "doppel==info", "doppel[span=info", "doppel=warning", "doppel=info=debug", "a;b", strings.Repeat("a", maxFilter+1)} {
		if l, err := ParseFilter(in); err == nil {
			t.Errorf("ParseFilter(%.40q) = %v, want an error", in, l)
		}
	}
}

// FuzzParseFilter: any filter parses to a level or is refused, never a
// panic, and the level is one Doppel writes at or off.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"info", "doppel_proxy=debug,hyper=trace", "[a{b=c}]=warn", "doppel[x]y=5", "=", ",,", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1024 {
			return
		}
		l, err := ParseFilter(s)
		if err != nil {
			return
		}
		switch l {
		case LevelTrace, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, LevelOff:
		default:
			t.Fatalf("ParseFilter(%q) = %v", s, l)
		}
	})
}

func TestTextFormat(t *testing.T) {
	var out lockedBuffer
	l := NewLogger(&out, "info", "text")
	l.LogRequest(&Exchange{RequestID: "r1", Proxy: "zeta", Method: "GET", Path: "/a", Status: 200, UpstreamContacted: true, UpstreamAnswered: true, UpstreamStatus: 200})
	l.Warn("hello", "k", 1, "s", "two words")
	l.Flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  INFO doppel/internal/proxy: request proxied request_id="r1" proxy="zeta" method="GET" path="/a" status=200 duration_ms=0 upstream_contacted=true upstream_status=200 upstream_duration_ms=0 loss_injected=false latency_injected_ms=0 fault=""$`),
		regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  WARN doppel/internal/telemetry: hello k=1 s="two words"$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got %q", len(want), out.String())
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d is not tracing's text line: %q", i, lines[i])
		}
	}
}

// Any line is tracing's JSON, its target the package that logged it.
func TestJSONFormat(t *testing.T) {
	var out lockedBuffer
	l := NewLogger(&out, "trace", "json")
	l.Log(context.Background(), LevelTrace, "hello", "k", 1, "f", 1.5, "b", true, "list", []string{"a", "b"}, slog.Group("g", "x", "y"))
	l.With("w", "v").WithGroup("grp").Error("oops", "e", errors.New("broke"))
	l.Flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
	want := []string{
		`{"level":"TRACE","fields":{"message":"hello","k":1,"f":1.5,"b":true,"list":["a","b"],"g.x":"y"},"target":"doppel/internal/telemetry"}`,
		`{"level":"ERROR","fields":{"message":"oops","w":"v","grp.e":"broke"},"target":"doppel/internal/telemetry"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got %q", len(want), out.String())
	}
	for i, line := range lines {
		const head = `{"timestamp":"`
		end := strings.Index(line, `",`)
		if !strings.HasPrefix(line, head) || end < 0 || !stamp.MatchString(line[len(head):end]) {
			t.Errorf("line %d has no tracing timestamp first: %s", i, line)
			continue
		}
		if rest := "{" + line[end+2:]; rest != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, rest, want[i])
		}
	}
}

func TestPackageTarget(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/doppelproxy/doppel/internal/proxy.(*Handler).finish":           "doppel/internal/proxy",
		"github.com/doppelproxy/doppel/internal/change.(*Controller).Follow.func1": "doppel/internal/change",
		"main.serve": "doppel/cmd/doppel",
		"github.com/doppelproxy/doppel/doppeltest.Start[...]":          "doppel/doppeltest",
		"github.com/doppelproxy/doppel/internal/x.F[github.com/a/b.T]": "doppel/internal/x",
		"net/http.(*conn).serve":                                       "net/http",
	} {
		if got := packageTarget(fn); got != want {
			t.Errorf("packageTarget(%q) = %q, want %q", fn, got, want)
		}
	}
}

func BenchmarkRequestLine(b *testing.B) {
	r := &Exchange{RequestID: "0d7e9a2c-5b1f-4c9e-8a43-2f6d1b7c9e01", Proxy: "zeta", Method: "GET", Path: "/items/42", Status: 200, Duration: 1234567, UpstreamContacted: true, UpstreamAnswered: true, UpstreamStatus: 200, UpstreamDuration: 1000000}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			msg, level := r.Event()
			buf = appendRequestJSON(buf[:0], time.Now(), msg, level, r)
		}
	})
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		l := slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil))
		for b.Loop() {
			l.LogAttrs(context.Background(), slog.LevelInfo, "request", r.attrs()...)
		}
	})
}

func TestNewRequestIDIsDistinctHex(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 10000 {
		id := NewRequestID()
		if !form.MatchString(id) || seen[id] {
			t.Fatalf("minted %q, seen before: %v", id, seen[id])
		}
		seen[id] = true
	}
}

func BenchmarkNewRequestID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewRequestID()
	}
}

func TestTimestamp(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", -7*3600)),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(12345, 6, 7, 8, 9, 10, 11000, time.UTC),
	} {
		if got, want := string(appendTimestamp(nil, at)), at.UTC().Format("2006-01-02T15:04:05.000000Z"); got != want {
			t.Errorf("%v: %s, want %s", at, got, want)
		}
	}
}
