package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// closing is an HTTP/1.1 answer that closes its connection and names a
// header in the same Connection field: Go's transport deletes that field,
// so only the bytes on the wire say X-Internal is hop-by-hop.
const closing = "HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Internal: secret\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok"

// rawUpstream serves each accepted connection with serve on a bare
// listener, then closes it. It reports how many connections it accepted.
func rawUpstream(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String(), &accepted
}

// answerEach answers the requests on one connection in turn with answers,
// written as they are.
func answerEach(answers ...string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for _, a := range answers {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, a); err != nil {
				return
			}
		}
	}
}

// hijacking answers every request with raw bytes, written on the
// connection (plain or TLS) taken over from the server.
func hijacking(answer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer c.Close()
		_, _ = brw.WriteString(answer)
		_ = brw.Flush()
	}
}

// trusting is NewTransport trusting srv's test certificate.
func trusting(srv *httptest.Server) *http.Transport {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tr := NewTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return tr
}

// wantHeaders checks what the client got: present ones with their value,
// absent ones (value "") not at all.
func wantHeaders(t *testing.T, res *http.Response, body []byte, want map[string]string) {
	t.Helper()
	if res.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("got %d %q, want 200 \"ok\"", res.StatusCode, body)
	}
	for name, v := range want {
		got, ok := res.Header[http.CanonicalHeaderKey(name)]
		switch {
		case v == "" && ok:
			t.Errorf("%s reached the client: %q", name, got)
		case v != "" && strings.Join(got, ",") != v:
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}
}

func TestConnectionNamesDroppedWithClose(t *testing.T) {
	cases := map[string]struct {
		fields string // the header lines before Content-Length
		want   map[string]string
	}{
		"close and one name": {
			"Connection: close, X-Internal\r\nX-Internal: secret\r\nX-Kept: yes\r\n",
			map[string]string{"X-Internal": "", "X-Kept": "yes"},
		},
		"names over two field lines, any case": {
			"Connection: X-One\r\nX-One: 1\r\nconnection: x-two ,CLOSE,\tX-Three\r\nX-Two: 2\r\nX-Three: 3\r\nX-Kept: yes\r\n",
			map[string]string{"X-One": "", "X-Two": "", "X-Three": "", "X-Kept": "yes"},
		},
		"a folded Connection line": {
			"Connection: close,\r\n X-Folded\r\nX-Folded: 1\r\nX-Kept: yes\r\n",
			map[string]string{"X-Folded": "", "X-Kept": "yes"},
		},
		"LF line ends": {
			"Connection: close, X-Internal\nX-Internal: secret\nX-Kept: yes\n",
			map[string]string{"X-Internal": "", "X-Kept": "yes"},
		},
		// As ReverseProxy does for a named Content-Length: the header goes,
		// and Doppel's server frames the body itself.
		"Content-Length named": {
			"Connection: close, Content-Length\r\nX-Kept: yes\r\n",
			map[string]string{"X-Kept": "yes"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			eol := "\r\n"
			if !strings.Contains(tc.fields, "\r") {
				eol = "\n"
			}
			up, _ := rawUpstream(t, answerEach("HTTP/1.1 200 OK"+eol+tc.fields+"Content-Length: 2"+eol+eol+"ok"))
			d := start(t, oneProxy(up, ""), nil)
			res, body := get(t, d.URL+"/x", nil)
			wantHeaders(t, res, body, tc.want)
		})
	}
}

func TestConnectionNamesAfter100Continue(t *testing.T) {
	up, _ := rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		// The 100 names X-Kept: only the final block's names count.
		_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\nConnection: X-Kept\r\n\r\n")
		if b, _ := io.ReadAll(req.Body); string(b) != "payload" {
			_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return
		}
		_, _ = io.WriteString(c, closing)
	})
	d := start(t, oneProxy(up, ""), nil)
	res, body := do(t, http.MethodPost, d.URL+"/x", map[string]string{"Expect": "100-continue"}, strings.NewReader("payload"))
	wantHeaders(t, res, body, map[string]string{"X-Internal": "", "X-Kept": "yes"})
}

func TestConnectionNamesOnAReusedConnection(t *testing.T) {
	// Two keep-alive answers name X-Kept (ReverseProxy drops it itself);
	// the third closes and names X-Internal. A stale block would drop
	// X-Kept from the third.
	alive := "HTTP/1.1 200 OK\r\nConnection: X-Kept\r\nX-Kept: no\r\nX-Internal: visible\r\nContent-Length: 2\r\n\r\nok"
	up, accepted := rawUpstream(t, answerEach(alive, alive, closing))
	d := start(t, oneProxy(up, ""), nil)
	for range 2 {
		res, body := get(t, d.URL+"/x", nil)
		wantHeaders(t, res, body, map[string]string{"X-Internal": "visible", "X-Kept": ""})
	}
	res, body := get(t, d.URL+"/x", nil)
	wantHeaders(t, res, body, map[string]string{"X-Internal": "", "X-Kept": "yes"})
	if n := accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want the three answers on one", n)
	}
}

func TestConnectionNamesOverTLS(t *testing.T) {
	up := httptest.NewUnstartedServer(hijacking(closing))
	up.StartTLS() // HTTP/1.1 only: EnableHTTP2 is false
	t.Cleanup(up.Close)
	d := startRewriting(t, oneProxy(up.URL, ""), trusting(up), "")
	res, body := get(t, d.URL+"/x", nil)
	wantHeaders(t, res, body, map[string]string{"X-Internal": "", "X-Kept": "yes"})
}

func TestHTTP2UpstreamStillH2(t *testing.T) {
	var protos atomic.Value
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto)
		w.Header().Set("X-Kept", "yes")
		_, _ = io.WriteString(w, "ok")
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	d := startRewriting(t, oneProxy(up.URL, ""), trusting(up), "")
	for range 2 {
		res, body := get(t, d.URL+"/x", nil)
		wantHeaders(t, res, body, map[string]string{"X-Kept": "yes"})
		if p := protos.Load(); p != "HTTP/2.0" {
			t.Fatalf("the upstream was reached over %v, want HTTP/2.0", p)
		}
	}
}

// A WebSocket upgrade must reach an h2-capable upstream over HTTP/1.1, as
// Go's transport dials it when it does its own TLS.
func TestWebSocketUpgradeToH2CapableUpstream(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 {
			http.Error(w, "upgrade over "+r.Proto, http.StatusHTTPVersionNotSupported)
			return
		}
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = io.WriteString(c, line)
	}))
	up.EnableHTTP2 = true
	up.StartTLS()
	t.Cleanup(up.Close)
	d := startRewriting(t, oneProxy(up.URL, ""), trusting(up), "")

	c, err := net.Dial("tcp", d.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: doppel.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d (%s), want 101", res.StatusCode, b)
	}
	_, _ = io.WriteString(c, "ping\n")
	if line, _ := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("the upgraded connection echoed %q", line)
	}
}

// The client half-closes an upgraded connection and the upstream answers
// after it read to the end: the half-close reaches the upstream.
func TestUpgradeHalfClose(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		b, _ := io.ReadAll(brw)
		_, _ = io.WriteString(c, "got "+string(b))
	}))
	t.Cleanup(up.Close)
	d := start(t, oneProxy(up.URL, ""), nil)

	c, err := net.Dial("tcp", d.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /up HTTP/1.1\r\nHost: doppel.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	_, _ = io.WriteString(c, "ping")
	_ = c.(*net.TCPConn).CloseWrite()
	if b, _ := io.ReadAll(br); string(b) != "got ping" {
		t.Fatalf("after the half-close the client read %q, want \"got ping\"", b)
	}
	// The request line says what the client got: the upstream's 101.
	if l := d.logs.lines(t, 1); len(l) != 1 || l[0]["status"] != 101.0 || l[0]["upstream_status"] != 101.0 {
		t.Fatalf("an upgrade's request line: %v", l)
	}
}

// Through an HTTP proxy an https target is tunnelled, and its TLS is the
// transport's own: the answer still arrives (its block is not kept).
func TestHTTPSThroughConnectProxy(t *testing.T) {
	up := httptest.NewUnstartedServer(hijacking(closing))
	up.StartTLS()
	t.Cleanup(up.Close)
	var tunnels atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		dst, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer dst.Close()
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer c.Close()
		tunnels.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(dst, brw) }()
		_, _ = io.Copy(c, dst)
	}))
	t.Cleanup(proxy.Close)
	tr := trusting(up)
	proxyURL, _ := url.Parse(proxy.URL)
	tr.Proxy = http.ProxyURL(proxyURL)
	d := startRewriting(t, oneProxy(up.URL, ""), tr, "")
	res, body := get(t, d.URL+"/x", nil)
	wantHeaders(t, res, body, map[string]string{"X-Kept": "yes"})
	if tunnels.Load() != 1 {
		t.Errorf("%d CONNECT tunnels, want 1", tunnels.Load())
	}
}

// scripted is a connection whose reads return the given chunks in turn.
type scripted struct {
	net.Conn
	chunks []string
}

func (s *scripted) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	if s.chunks[0] = s.chunks[0][n:]; s.chunks[0] == "" {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

// Wherever reads split the bytes, the final block is the one kept.
func TestHeaderBlockCaptureSplits(t *testing.T) {
	final := "HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Kept: yes\r\n\r\n"
	wire := "HTTP/1.1 100 Continue\r\nConnection: X-Kept\r\n\r\nHTTP/1.1 103 Early Hints\nLink: </a>\n\n" + final + "body\r\n\r\nmore"
	var bytewise []string
	for i := range len(wire) {
		bytewise = append(bytewise, wire[i:i+1])
	}
	c := &headerConn{Conn: &scripted{chunks: bytewise}}
	c.arm()
	if _, _ = io.ReadAll(c); string(c.block) != final {
		t.Fatalf("read byte by byte: kept %q", c.block)
	}
	for i := 0; i <= len(wire); i++ {
		for j := i; j <= len(wire); j += 7 {
			c := &headerConn{Conn: &scripted{chunks: []string{wire[:i], wire[i:j], wire[j:]}}}
			c.arm()
			if got, _ := io.ReadAll(c); string(got) != wire {
				t.Fatalf("split %d/%d: read %q", i, j, got)
			}
			if string(c.block) != final || c.capturing.Load() {
				t.Fatalf("split %d/%d: kept %q (still capturing: %v)", i, j, c.block, c.capturing.Load())
			}
		}
	}
}

func TestHeaderBlockBounded(t *testing.T) {
	huge := "HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Big: " + strings.Repeat("b", maxHeaderBlock) + "\r\nConnection: X-Late\r\n\r\n"
	c := &headerConn{Conn: &scripted{chunks: []string{huge}}}
	c.arm()
	if got, _ := io.ReadAll(c); string(got) != huge {
		t.Fatal("the bytes did not pass through")
	}
	if len(c.block) != maxHeaderBlock || c.capturing.Load() {
		t.Fatalf("kept %d bytes, still capturing: %v", len(c.block), c.capturing.Load())
	}
	h := http.Header{"X-Internal": {"1"}, "X-Late": {"1"}, "X-Big": {"1"}}
	c.dropConnectionNamed(h)
	if _, ok := h["X-Internal"]; ok {
		t.Error("a name within the bound was not dropped")
	}
	if len(h) != 2 {
		t.Errorf("left %v, want X-Late (past the bound) and X-Big", h)
	}
	c.arm()
	if cap(c.block) > keptBlockCap {
		t.Errorf("re-armed with %d bytes of capacity", cap(c.block))
	}
}
