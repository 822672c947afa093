package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/certs/certstest"
)

// A client that sent its FIN while its latency was waited: a half-closed
// one (shutdown(SHUT_WR)) still reads and gets its answer when it is due;
// one that closed its connection is logged 499. The GET is answered off
// the server (parked), the POST in the handler (it has a body).

const finLatency = time.Second

const finProxies = `proxies:
  - name: slow
    type: http
    url: http://127.0.0.1:9/
    latency: {percentage: 1, min: 1, max: 1}
    mocks:
      - name: parked
        request: {method: GET, url: "^/fin$"}
        response: {status: 201, body: "parked answer"}
      - name: in-handler
        request: {method: POST, url: "^/fin$"}
        response: {status: 202, body: "handler answer"}
`

// finRequests are the two paths, by the answer each gets.
var finRequests = []struct {
	name, request, status, body string
}{
	{"parked", "GET /fin HTTP/1.1\r\nHost: d\r\nX-Request-Id: %s\r\n\r\n", "201", "parked answer"},
	{"in the handler", "POST /fin HTTP/1.1\r\nHost: d\r\nX-Request-Id: %s\r\nContent-Length: 4\r\n\r\nbody", "202", "handler answer"},
}

// requestLine waits for the request line of the request id.
func requestLine(t *testing.T, p *proc, id string) map[string]any {
	t.Helper()
	l := p.waitLine("the request line of "+id, 20*time.Second, func(l string) bool {
		return isRequestLine(l) && lineField(l, "request_id") == id
	})
	obj, err := decodeLine(l)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// ms is a number field of a line, in milliseconds.
func ms(t *testing.T, l map[string]any, key string) time.Duration {
	t.Helper()
	f, err := l[key].(json.Number).Float64()
	if err != nil {
		t.Fatalf("%s: %v in %v", key, err, l)
	}
	return time.Duration(f * float64(time.Millisecond))
}

// halfClosed sends request on c, shuts its side and reads the answer.
func halfClosed(t *testing.T, c net.Conn, request string) (*http.Response, string, time.Duration) {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("the body: %v", err)
	}
	return res, string(b), time.Since(start)
}

func TestAHalfClosedClientIsAnsweredAfterTheLatency(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, finProxies)
	p, addr := serveUp(t, cfg, nil)
	for _, r := range finRequests {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			id := "half-" + strings.ReplaceAll(r.name, " ", "-")
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			res, body, took := halfClosed(t, c, strings.Replace(r.request, "%s", id, 1))
			if res.Status[:3] != r.status || body != r.body {
				t.Errorf("got %s %q, want %s %q", res.Status, body, r.status, r.body)
			}
			if took < finLatency {
				t.Errorf("answered after %v, before the latency of %v", took, finLatency)
			}
			l := requestLine(t, p, id)
			if l["status"] != json.Number(r.status) || ms(t, l, "latency_injected_ms") < finLatency-time.Millisecond {
				t.Errorf("logged %v", l)
			}
		})
	}
}

func TestAHalfClosedTLSClientIsAnsweredAfterTheLatency(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, leaf := certstest.PKI(t)
	certFile, keyFile := leaf.Files(t, dir)
	cfg := tlsConfig(t, dir, fmt.Sprintf("{cert: %q, key: %q}", certFile, keyFile), finProxies)
	p, addr := serveUp(t, cfg, nil)
	for _, r := range finRequests {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			id := "tls-half-" + strings.ReplaceAll(r.name, " ", "-")
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			// tls.Conn's CloseWrite is the close_notify: the server reads
			// the end of the client's side.
			res, body, took := halfClosed(t, c, strings.Replace(r.request, "%s", id, 1))
			if res.Status[:3] != r.status || body != r.body || took < finLatency {
				t.Errorf("got %s %q after %v, want %s %q after %v", res.Status, body, took, r.status, r.body, finLatency)
			}
			if l := requestLine(t, p, id); l["status"] != json.Number(r.status) {
				t.Errorf("logged %v", l)
			}
		})
	}
}

func TestAClientThatLeftDuringTheLatencyIsLogged499(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, finProxies)
	p, addr := serveUp(t, cfg, nil)
	for _, r := range finRequests {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			id := "left-" + strings.ReplaceAll(r.name, " ", "-")
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, strings.Replace(r.request, "%s", id, 1)); err != nil {
				t.Fatal(err)
			}
			c.Close()
			l := requestLine(t, p, id)
			// Doppel waited the whole latency, then found nobody to take
			// the answer.
			if l["status"] != json.Number("499") || ms(t, l, "latency_injected_ms") < finLatency-time.Millisecond ||
				ms(t, l, "duration_ms") < finLatency-time.Millisecond {
				t.Errorf("logged %v, want 499 after the latency", l)
			}
		})
	}
	t.Run("HTTP/2", func(t *testing.T) {
		t.Parallel()
		// On HTTP/2 a client that goes away resets its stream: it is gone
		// for certain, and the wait ends there.
		h2c := &http.Transport{Protocols: new(http.Protocols)}
		h2c.Protocols.SetUnencryptedHTTP2(true)
		defer h2c.CloseIdleConnections()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }})
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/fin", nil)
		req.Header.Set("X-Request-Id", "left-h2")
		if res, err := h2c.RoundTrip(req); err == nil {
			res.Body.Close()
			t.Fatalf("answered %s", res.Status)
		}
		if l := requestLine(t, p, "left-h2"); l["status"] != json.Number("499") {
			t.Errorf("logged %v, want 499", l)
		}
	})
}

// TestAForwardCancelledByAFINIsNotAnswered: a forwarded request is
// cancelled when its client's FIN comes before the upstream's answer (it
// cannot be told from a client that left); a client that only half-closed
// reads the connection's end and no answer, where it used to read an
// empty 200 the upstream never sent.
func TestAForwardCancelledByAFINIsNotAnswered(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("waits", up.URL, ""))
	p, addr := serveUp(t, cfg, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET /waits HTTP/1.1\r\nHost: d\r\nX-Request-Id: cancelled-by-fin\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 0 {
		t.Errorf("read %q, %v; want nothing and the end of the connection", got, err)
	}
	if l := requestLine(t, p, "cancelled-by-fin"); l["status"] != json.Number("499") {
		t.Errorf("logged %v, want 499", l)
	}
}
