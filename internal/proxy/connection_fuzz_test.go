package proxy

import (
	"io"
	"net/http"
	"testing"
)

// FuzzHeaderBlock: whatever an upstream sends and however reads split it,
// the bytes pass through unchanged, what is kept is bounded and does not
// depend on the split, and reading the Connection names from it never
// fails.
//
//	go test ./internal/proxy -run '^$' -fuzz FuzzHeaderBlock -fuzztime 1m
func FuzzHeaderBlock(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Internal: 1\r\n\r\nok", 5)
	f.Add("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\nConnection: close,\n X-A\n\n", 1)
	f.Add("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n", 30)
	f.Add("\n\n\r\n:::,,,\r\n", 2)
	f.Fuzz(func(t *testing.T, wire string, step int) {
		if step <= 0 {
			step = 1
		}
		whole := &headerConn{Conn: &scripted{chunks: []string{wire}}}
		whole.arm()
		if got, _ := io.ReadAll(whole); string(got) != wire {
			t.Fatalf("the bytes changed on the way: %q", got)
		}
		var chunks []string
		for i := 0; i < len(wire); i += step {
			chunks = append(chunks, wire[i:min(i+step, len(wire))])
		}
		split := &headerConn{Conn: &scripted{chunks: chunks}}
		split.arm()
		_, _ = io.ReadAll(split)
		if string(split.block) != string(whole.block) || split.capturing.Load() != whole.capturing.Load() {
			t.Fatalf("reads of %d bytes kept %q, one read kept %q", step, split.block, whole.block)
		}
		if len(whole.block) > maxHeaderBlock {
			t.Fatalf("kept %d bytes", len(whole.block))
		}
		h := http.Header{"X-Internal": {"1"}, "Content-Type": {"text/plain"}}
		whole.dropConnectionNamed(h)
	})
}
