package toxiproxy

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Where Toxiproxy 2.5.0 and 2.12.0 differ from what Doppel did before,
// each case as Toxiproxy answers it, over real sockets.

// echoUpstream is a TCP server that writes back what it reads.
func echoUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialProxy connects to a proxy's listen address.
func dialProxy(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echoes writes b through c and reads it back, or fails within 2 s.
func echoes(t *testing.T, c net.Conn, b string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(b)); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != b {
		t.Fatalf("read %q, %v; want %q", got, err, b)
	}
	_ = c.SetDeadline(time.Time{})
}

// answer is call's, the body without a final newline: what these tests
// read is the JSON, not where the answer ends.
func answer(t *testing.T, s *Server, method, path, body string) (int, string) {
	t.Helper()
	code, b := call(t, s, method, path, body)
	return code, strings.TrimSuffix(b, "\n")
}

// makeProxy creates a proxy of that name in front of upstream and
// returns it as the API answered.
func makeProxy(t *testing.T, s *Server, name, listen, upstream string) proxyJSON {
	t.Helper()
	code, body := call(t, s, "POST", "/proxies", `{"name":"`+name+`","listen":"`+listen+`","upstream":"`+upstream+`"}`)
	var p proxyJSON
	if err := json.Unmarshal([]byte(body), &p); code != 201 || err != nil {
		t.Fatalf("create %s: %d %s", name, code, body)
	}
	return p
}

// Toxiproxy's noop: a toxic like any, listed, changed and removed, that
// lets every byte pass.
func TestNoopIsAToxicThatDoesNothing(t *testing.T) {
	s := newServer(t)
	p := makeProxy(t, s, "db", "127.0.0.1:0", echoUpstream(t))
	c := dialProxy(t, p.Listen)
	echoes(t, c, "before")
	code, body := answer(t, s, "POST", "/proxies/db/toxics", `{"type":"noop","attributes":{"ignored":1}}`)
	if want := `{"name":"noop_downstream","type":"noop","stream":"downstream","toxicity":1,"attributes":{}}`; code != 200 || body != want {
		t.Fatalf("create: %d %s, want 200 %s", code, body, want)
	}
	code, body = call(t, s, "POST", "/proxies/db/toxics", `{"name":"up","type":"noop","stream":"upstream","toxicity":0.5}`)
	if code != 200 {
		t.Fatalf("an upstream noop: %d %s", code, body)
	}
	echoes(t, c, "during")
	echoes(t, dialProxy(t, p.Listen), "a new connection")
	code, body = answer(t, s, "PATCH", "/proxies/db/toxics/up", `{"toxicity":1}`)
	if want := `{"name":"up","type":"noop","stream":"upstream","toxicity":1,"attributes":{}}`; code != 200 || body != want {
		t.Fatalf("update: %d %s, want %s", code, body, want)
	}
	_, body = answer(t, s, "GET", "/proxies/db/toxics", "")
	if want := `[{"name":"up","type":"noop","stream":"upstream","toxicity":1,"attributes":{}},{"name":"noop_downstream","type":"noop","stream":"downstream","toxicity":1,"attributes":{}}]`; body != want {
		t.Fatalf("index: %s, want %s", body, want)
	}
	for _, name := range []string{"up", "noop_downstream"} {
		if code, body := call(t, s, "DELETE", "/proxies/db/toxics/"+name, ""); code != 204 {
			t.Fatalf("delete %s: %d %s", name, code, body)
		}
	}
	if _, body = answer(t, s, "GET", "/proxies/db/toxics", ""); body != "[]" {
		t.Fatalf("after the deletes: %s", body)
	}
	echoes(t, c, "after")
}
