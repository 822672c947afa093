package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The hand-written request encoder must write exactly what slog's JSON
// handler writes for the same line.
func TestRequestJSONMatchesSlog(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 7, 52, 111956879, time.UTC)
	lines := []Exchange{
		{RequestID: "0d7e9a2c", Proxy: "zeta", Method: "GET", Path: "/a/b", Status: 200, Duration: 1234567, UpstreamContacted: true, UpstreamStatus: 201, UpstreamDuration: 999, LatencyWaited: 300 * time.Millisecond},
		{RequestID: "id", Proxy: "", Method: "POST", Path: "/", Status: 404, ErrorCode: "PROXY_NOT_RESOLVED"},
		{RequestID: "id", Proxy: "zeta", Method: "GET", Path: "/", Status: 200, AdminTokenRemoved: "ci"},
		{RequestID: "id", Proxy: "zeta", Method: "GET", Path: "/", Status: 502, ErrorCode: "UPSTREAM_ERROR", UpstreamFailed: true,
			UpstreamCause: "connection_refused", UpstreamError: "dial tcp 127.0.0.1:9: connect: connection refused \"q\""},
		{RequestID: "ws", Proxy: "chat", Method: "GET", Path: "/ws", Status: 101, UpstreamContacted: true, UpstreamStatus: 101,
			Tunnel: &Tunnel{Up: 1 << 40, Down: 0, Duration: 2*time.Minute + 3}},
		{RequestID: "id", Proxy: "shop", Mock: "not-found", Method: "GET", Path: "/x", Status: 503, Faults: []string{"loss"}, Duration: 3 * time.Hour},
		{RequestID: "q\"uote\\back\nline\ttab\r\x01\x1f", Proxy: "p", Method: "BREW", Path: "/caf\xe9/\u2028\u2029/é/<&>", Status: 599},
	}
	for i, r := range lines {
		var want bytes.Buffer
		h := slog.NewJSONHandler(&want, nil)
		rec := slog.NewRecord(now, slog.LevelInfo, "request", 0)
		rec.AddAttrs(r.attrs()...)
		if err := h.Handle(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		got := appendRequestJSON(nil, now, &lines[i])
		if string(got) != want.String() {
			t.Errorf("line %d:\n got %s\nwant %s", i, got, want.String())
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

func TestLevelsAndOverride(t *testing.T) {
	cases := []struct {
		configured, env string
		logged          bool
	}{
		{"info", "", true},
		{"warn", "", false},
		{"info", "error", false},
		{"error", "debug", true},
		{"info", "   ", true},
		{"trace", "", true},
	}
	for _, c := range cases {
		t.Setenv(EnvLog, c.env)
		var out lockedBuffer
		l := NewLogger(&out, c.configured, "json")
		l.LogRequest(&Exchange{RequestID: "r", Method: "GET", Path: "/", Status: 200})
		l.Flush()
		if got := out.String() != ""; got != c.logged {
			t.Errorf("level %q with %s=%q: logged=%v, want %v", c.configured, EnvLog, c.env, got, c.logged)
		}
	}
}

func TestTextFormat(t *testing.T) {
	var out lockedBuffer
	l := NewLogger(&out, "info", "text")
	l.LogRequest(&Exchange{RequestID: "r1", Proxy: "zeta", Method: "GET", Path: "/a", Status: 200, UpstreamContacted: true, UpstreamStatus: 200})
	l.Flush()
	s := out.String()
	if json.Valid([]byte(s)) || !strings.Contains(s, "msg=request request_id=r1 proxy=zeta method=GET path=/a status=200") {
		t.Fatalf("not a slog text line: %q", s)
	}
	var js lockedBuffer
	l = NewLogger(&js, "info", "json")
	l.Info("hello", "k", 1)
	l.Flush()
	if !json.Valid([]byte(strings.TrimSpace(js.String()))) {
		t.Fatalf("json format wrote %q", js.String())
	}
}

func BenchmarkRequestLine(b *testing.B) {
	r := &Exchange{RequestID: "0d7e9a2c-5b1f-4c9e-8a43-2f6d1b7c9e01", Proxy: "zeta", Method: "GET", Path: "/items/42", Status: 200, Duration: 1234567, UpstreamContacted: true, UpstreamStatus: 200, UpstreamDuration: 1000000}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf = appendRequestJSON(buf[:0], time.Now(), r)
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
