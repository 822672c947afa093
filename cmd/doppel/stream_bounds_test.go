package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// streamsDoc serves a mock taking bodies, with the journal's reads public:
// streams then count against the client's address.
func streamsDoc(t *testing.T) served {
	t.Helper()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - {name: take, request: {method: POST, url: "^/take$"}, response: {status: 200, body: "taken"}}
`)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  access: {read: public, list: public}\n", 1))
	return serveArgs(t, dir, nil, "serve", "--config", cfg)
}

// openStream asks for the journal's stream from the local address ip,
// with a receive buffer of rcvbuf bytes when not zero, and returns the
// connection and the answer, its body not read.
func openStream(t *testing.T, admin, ip string, rcvbuf int) (net.Conn, *http.Response) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
			if err != nil {
				return err
			}
			return serr
		}
	}
	conn, err := d.Dial("tcp", strings.TrimPrefix(admin, "http://"))
	if err != nil {
		t.Fatalf("dialling from %s: %v", ip, err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := io.WriteString(conn, "GET /api/v1/requests/stream HTTP/1.1\r\nHost: doppel\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the stream from %s: %v", ip, err)
	}
	return conn, res
}

// refusedStream expects 429 TOO_MANY_SUBSCRIBERS with a message holding
// want.
func refusedStream(t *testing.T, res *http.Response, want string) {
	t.Helper()
	var env struct{ Code, Message string }
	_ = json.NewDecoder(res.Body).Decode(&env)
	if res.StatusCode != 429 || env.Code != "TOO_MANY_SUBSCRIBERS" || !strings.Contains(env.Message, want) {
		t.Errorf("want 429 TOO_MANY_SUBSCRIBERS saying %q: %d %+v", want, res.StatusCode, env)
	}
}

// TestStreamsAreBounded: at most 16 streams of the journal per caller
// (here the client's address, reads being public) and 256 in all; beyond,
// 429 TOO_MANY_SUBSCRIBERS naming the bound.
func TestStreamsAreBounded(t *testing.T) {
	t.Parallel()
	s := streamsDoc(t)
	defer s.stop(t)
	open := func(ip string) {
		t.Helper()
		if _, res := openStream(t, s.admin, ip, 0); res.StatusCode != 200 {
			t.Fatalf("stream from %s: %d", ip, res.StatusCode)
		}
	}
	for range 16 {
		open("127.0.0.1")
	}
	_, res := openStream(t, s.admin, "127.0.0.1", 0)
	refusedStream(t, res, "client 127.0.0.1 has 16 streams of the journal open")
	// Another address has its own 16, until 256 are open in all.
	for a := 2; a <= 16; a++ {
		for range 16 {
			open(fmt.Sprintf("127.0.0.%d", a))
		}
	}
	_, res = openStream(t, s.admin, "127.0.0.17", 0)
	refusedStream(t, res, "256 streams of the journal are open")
}

// TestASlowStreamIsSkippedAhead: a stream whose client does not read
// holds up no request; when it reads again it gets the event `dropped`
// with the count of the entries it lost, then the newest 1,000: every
// entry recorded is either sent or counted.
func TestASlowStreamIsSkippedAhead(t *testing.T) {
	t.Parallel()
	s := streamsDoc(t)
	defer s.stop(t)
	_, res := openStream(t, s.admin, "127.0.0.1", 4096)
	if res.StatusCode != 200 {
		t.Fatalf("the stream: %d", res.StatusCode)
	}
	events := bufio.NewReader(res.Body)
	if l, err := events.ReadString('\n'); err != nil || !strings.HasPrefix(l, ": ") {
		t.Fatalf("the stream began with %q %v", l, err)
	}
	// Requests with 4 KiB bodies (kept whole by the journal), while the
	// stream's client reads nothing: far more than the connection buffers.
	const n = 3000
	body := strings.Repeat("b", 4096)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for i := range n {
		req, _ := http.NewRequest("POST", s.proxy+"/take", strings.NewReader(body))
		req.Header.Set("X-Request-ID", fmt.Sprint("r-", i))
		r, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	var sent, dropped, drops, sinceDrop int
	last := fmt.Sprint("r-", n-1)
	event := ""
read:
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream, after %d entries and %d dropped: %v", sent, dropped, err)
		}
		line = strings.TrimSuffix(line, "\n")
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch event {
		case "dropped":
			var d struct{ Dropped int }
			if err := json.Unmarshal([]byte(data), &d); err != nil || d.Dropped <= 0 {
				t.Fatalf("a dropped event: %q", data)
			}
			dropped += d.Dropped
			drops++
			sinceDrop = 0
		case "request":
			var e struct{ ID string }
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("an entry: %v", err)
			}
			sent++
			sinceDrop++
			if e.ID == last {
				break read
			}
		}
	}
	t.Logf("%d entries sent, %d dropped in %d events", sent, dropped, drops)
	if drops == 0 || sent+dropped != n {
		t.Errorf("%d sent and %d dropped (%d dropped events) of %d recorded", sent, dropped, drops, n)
	}
	if sinceDrop != 1000 {
		t.Errorf("%d entries after the last dropped event, want the newest 1000", sinceDrop)
	}
}
