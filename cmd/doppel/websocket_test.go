package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// WebSocket through the binary (SPEC §17.7), with a real client and a real
// server of github.com/coder/websocket on each side.

// frame is the size of the upstream's messages on /v2/stream: 1,000 bytes
// of payload and a 4-byte header (no mask from a server).
const frameBytes = 1004

// wsUpstream serves /v2/echo (every message back, prefixed), /v2/stream
// (messages of 1,000 bytes until the client leaves) and /v2/refuse (a 403
// instead of the switch). It reports the header Doppel injects.
func wsUpstream(t *testing.T) string {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/refuse" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, "no sockets for you")
			return
		}
		w.Header().Set("X-Saw-Injected", r.Header.Get("X-Injected"))
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		switch r.URL.Path {
		case "/v2/echo":
			for {
				typ, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				if err := c.Write(ctx, typ, append([]byte("echo "), b...)); err != nil {
					return
				}
			}
		case "/v2/stream":
			msg := []byte(strings.Repeat("x", 1000))
			for {
				if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}).URL
}

// wsDoppel serves the proxies below the given extra YAML for chat.
func wsDoppel(t *testing.T, chat string) (*proc, string, string) {
	t.Helper()
	dir := t.TempDir()
	up := wsUpstream(t)
	cfg := serveConfig(t, dir, 0, 0, fmt.Sprintf(`proxies:
  - name: chat
    type: http
    url: %s/v2/
    timeout: 1
    resolve: {type: header, header: X-Backend}
    headers: {X-Injected: "yes"}
%s  - name: other
    type: http
    url: http://127.0.0.1:9/
`, up, chat))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	return p, addr, adminAddrOf(t, p)
}

func wsDial(ctx context.Context, url string) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader:      http.Header{"X-Backend": {"chat"}},
		CompressionMode: websocket.CompressionDisabled,
	})
}

// tunnelLine waits for the request line of path.
func tunnelLine(t *testing.T, p *proc, path string) map[string]any {
	t.Helper()
	var line map[string]any
	p.waitLine("the request line of "+path, 10*time.Second, func(l string) bool {
		if m, err := decodeLine(l); err == nil && isRequest(m) && m["path"] == path {
			line = m
			return true
		}
		return false
	})
	return line
}

func number(v any) float64 {
	n, _ := v.(json.Number)
	f, _ := n.Float64()
	return f
}

func TestAWebSocketPassesThroughBothWays(t *testing.T) {
	t.Parallel()
	p, addr, admin := wsDoppel(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, res, err := wsDial(ctx, "ws://"+addr+"/echo")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if res.Header.Get("X-Saw-Injected") != "yes" || res.Header.Get("X-Request-Id") == "" {
		t.Errorf("the switch's headers: %v", res.Header)
	}
	c.SetReadLimit(1 << 20)
	const n = 300
	sent, got := 0, 0
	// Longer than the proxy's timeout of 1 s: the timeout bounds the
	// handshake, not the tunnel.
	for i := range n {
		typ, msg := websocket.MessageText, []byte(fmt.Sprintf("message %d", i))
		if i%2 == 1 {
			typ, msg = websocket.MessageBinary, []byte{byte(i), 0, 0xff, byte(i >> 8)}
		}
		if err := c.Write(ctx, typ, msg); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		rt, back, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if rt != typ || string(back) != "echo "+string(msg) {
			t.Fatalf("message %d came back as %v %q", i, rt, back)
		}
		sent, got = sent+len(msg), got+len(back)
		if i == n/2 {
			time.Sleep(1200 * time.Millisecond)
		}
	}
	// Nothing is logged while the tunnel is open.
	for _, l := range p.jsonLines() {
		if l["path"] == "/echo" {
			t.Fatalf("logged before the tunnel closed: %v", l)
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
		t.Fatalf("close: %v", err)
	}
	line := tunnelLine(t, p, "/echo")
	up, down := number(line["tunnel_bytes_up"]), number(line["tunnel_bytes_down"])
	if line["status"] != json.Number("101") || line["proxy"] != "chat" || up < float64(sent) || down < float64(got) ||
		up > float64(sent+n*14+64) || down > float64(got+n*4+64) || number(line["tunnel_duration_ms"]) < 1200 {
		t.Errorf("the line: %v (sent %d, got %d)", line, sent, got)
	}
	r := mustGet(t, newClient(), "http://"+admin+"/api/v1/requests?path=^/echo$", nil)
	var list struct {
		Requests []struct {
			Status int `json:"status"`
			Tunnel *struct {
				BytesUp    float64 `json:"bytes_up"`
				BytesDown  float64 `json:"bytes_down"`
				DurationMS float64 `json:"duration_ms"`
			} `json:"tunnel"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Requests) != 1 {
		t.Fatalf("journal: %v %s", err, r.body)
	}
	if e := list.Requests[0]; e.Status != 101 || e.Tunnel == nil || e.Tunnel.BytesUp != up || e.Tunnel.BytesDown != down {
		t.Errorf("the journal's entry: %+v, the line's %v/%v", e, up, down)
	}
}

func TestAWebSocketIsResolvedAndConfined(t *testing.T) {
	t.Parallel()
	_, addr, _ := wsDoppel(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Without the header, the default proxy has no upstream listening.
	_, res, err := websocket.Dial(ctx, "ws://"+addr+"/echo", nil)
	if err == nil || res == nil || res.StatusCode != http.StatusBadGateway {
		t.Errorf("unresolved to chat: %v %v", res, err)
	}
	// An escaping path is refused before anything goes upstream.
	_, res, err = wsDial(ctx, "ws://"+addr+"/%2e%2e/echo")
	if err == nil || res == nil || res.StatusCode != http.StatusBadRequest {
		t.Errorf("an escaping path: %v %v", res, err)
	}
	// An upstream that refuses the upgrade answers its own status.
	_, res, err = wsDial(ctx, "ws://"+addr+"/refuse")
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("a refused upgrade: %v %v", res, err)
	}
	if b, _ := io.ReadAll(res.Body); string(b) != "no sockets for you" {
		t.Errorf("the refusal's body: %q", b)
	}
}

func TestWebSocketFaults(t *testing.T) {
	t.Parallel()
	t.Run("loss refuses the handshake", func(t *testing.T) {
		t.Parallel()
		_, addr, _ := wsDoppel(t, "    loss: {percentage: 1, status: 503}\n")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, res, err := wsDial(ctx, "ws://"+addr+"/echo")
		if err == nil || res == nil || res.StatusCode != 503 {
			t.Fatalf("%v %v", res, err)
		}
		if b, _ := io.ReadAll(res.Body); !strings.Contains(string(b), "LOSS_INJECTED") {
			t.Errorf("body %s", b)
		}
	})
	t.Run("latency delays the handshake only", func(t *testing.T) {
		t.Parallel()
		p, addr, _ := wsDoppel(t, "    latency: {percentage: 1, min: 0.4, max: 0.4}\n")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		c, _, err := wsDial(ctx, "ws://"+addr+"/echo")
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 400*time.Millisecond {
			t.Errorf("the handshake took %v", took)
		}
		for i := range 5 {
			start := time.Now()
			if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Read(ctx); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 300*time.Millisecond {
				t.Errorf("message %d took %v: the delay is the handshake's", i, took)
			}
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
		// The wait taken is the target less what the handshake took.
		if line := tunnelLine(t, p, "/echo"); number(line["duration_ms"]) < 399 || number(line["latency_injected_ms"]) < 300 {
			t.Errorf("the line: %v", line)
		}
	})
	for _, how := range []string{"reset", "close"} {
		t.Run("abort at body cuts the tunnel after its bytes ("+how+")", func(t *testing.T) {
			t.Parallel()
			p, addr, _ := wsDoppel(t, "    abort: {percentage: 1, at: body, after: 2500, how: "+how+"}\n")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, _, err := wsDial(ctx, "ws://"+addr+"/stream")
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			whole := 0
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					if errors.Is(err, context.DeadlineExceeded) {
						t.Fatal("the tunnel was not cut")
					}
					break
				}
				if len(b) != 1000 {
					t.Fatalf("a message of %d bytes", len(b))
				}
				whole++
			}
			if whole != 2500/frameBytes {
				t.Errorf("%d whole messages before the cut, want %d", whole, 2500/frameBytes)
			}
			line := tunnelLine(t, p, "/stream")
			if number(line["tunnel_bytes_down"]) != 2500 || line["fault"] != "abort" || line["status"] != json.Number("101") {
				t.Errorf("the line: %v", line)
			}
		})
	}
	t.Run("abort at response cuts before the switch", func(t *testing.T) {
		t.Parallel()
		p, addr, _ := wsDoppel(t, "    abort: {percentage: 1, at: response}\n")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, res, err := wsDial(ctx, "ws://"+addr+"/echo")
		if err == nil || res != nil {
			t.Fatalf("the handshake: %v %v", res, err)
		}
		if line := tunnelLine(t, p, "/echo"); line["status"] != json.Number("444") || line["fault"] != "abort" {
			t.Errorf("the line: %v", line)
		}
	})
}
