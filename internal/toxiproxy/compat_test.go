package toxiproxy

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
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

// Every answer of a route carries X-Toxiproxy-Request-Id, an xid as
// Toxiproxy's are: 20 characters of 0-9 and a-v, the time it was made,
// the process, and a counter one more each time; errors too. A path no
// route has has none, as Toxiproxy's router does not reach its logger.
func TestAnswersCarryAToxiproxyRequestID(t *testing.T) {
	srv := httptest.NewServer(newServer(t))
	defer srv.Close()
	shape := regexp.MustCompile(`^[0-9a-v]{20}$`)
	var last uint32
	for i, c := range []struct{ method, path, body, agent string }{
		{"GET", "/proxies", "", ""},
		{"POST", "/proxies", `{"name":`, ""},
		{"GET", "/proxies/nope", "", ""},
		{"GET", "/version", "", ""},
		{"POST", "/reset", "", ""},
		{"GET", "/proxies", "", "Mozilla/5.0"},
	} {
		began := time.Now().Add(-time.Second)
		r, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("User-Agent", c.agent)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Toxiproxy-Request-Id")
		if !shape.MatchString(id) || len(resp.Header.Values("X-Toxiproxy-Request-Id")) != 1 {
			t.Fatalf("%s %s (%d): X-Toxiproxy-Request-Id %q, want one of 20 characters of 0-9a-v", c.method, c.path, resp.StatusCode, id)
		}
		b, err := xidEncoding.DecodeString(id)
		if err != nil || len(b) != 12 {
			t.Fatalf("%q does not decode to 12 bytes: %v", id, err)
		}
		made := time.Unix(int64(binary.BigEndian.Uint32(b[0:4])), 0)
		pid := binary.BigEndian.Uint16(b[7:9])
		n := uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])
		if made.Before(began.Truncate(time.Second)) || made.After(time.Now()) || pid != uint16(os.Getpid()) {
			t.Errorf("%q: made %v, pid %d; want now and %d", id, made, pid, uint16(os.Getpid()))
		}
		if i > 0 && n != (last+1)&0xffffff {
			t.Errorf("%q: counter %d after %d", id, n, last)
		}
		last = n
	}
	resp, err := http.Get(srv.URL + "/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("X-Toxiproxy-Request-Id") != "" {
		t.Errorf("a path of no route: %d with %q, want 404 without an id", resp.StatusCode, resp.Header.Get("X-Toxiproxy-Request-Id"))
	}
}

// The encoding is xid's: the 12 bytes of its documented example are its
// documented string.
func TestRequestIDsAreWrittenAsXidsAre(t *testing.T) {
	id := []byte{0x4d, 0x88, 0xe1, 0x5b, 0x60, 0xf4, 0x86, 0xe4, 0x28, 0x41, 0x2d, 0xc9}
	if got := xidEncoding.EncodeToString(id); got != "9m4e2mr0ui3e8a215n4g" {
		t.Errorf("written %q, want 9m4e2mr0ui3e8a215n4g", got)
	}
}

// rawCall is call with the answer's headers.
func rawCall(t *testing.T, s *Server, method, path, body string) (int, http.Header, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, w.Result().Header, string(b)
}

// takenPort holds a loopback port for the test and returns it.
func takenPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// Toxiproxy answers an error through http.Error: its JSON and a newline,
// as text/plain with nosniff; a listen that fails is net.Listen's error
// word for word, with no words before it, 500.
func TestErrorAnswersAreToxiproxysBytes(t *testing.T) {
	s := newServer(t)
	port := takenPort(t)
	inUse := `{"error":"listen tcp 127.0.0.1:` + port + `: bind: address already in use","status":500}` + "\n"
	for _, c := range []struct {
		name, method, path, body, want string
		status                         int
	}{
		{"listen in use", "POST", "/proxies", `{"name":"db","listen":"127.0.0.1:` + port + `","upstream":"127.0.0.1:1"}`, inUse, 500},
		{"listen in use, by name", "POST", "/proxies", `{"name":"db","listen":"localhost:` + port + `","upstream":"127.0.0.1:1"}`, inUse, 500},
		{"no proxy", "GET", "/proxies/nope", "", `{"error":"proxy not found","status":404}` + "\n", 404},
		{"no name", "POST", "/proxies", `{"upstream":"127.0.0.1:1"}`, `{"error":"missing required field: name","status":400}` + "\n", 400},
	} {
		code, h, body := rawCall(t, s, c.method, c.path, c.body)
		if code != c.status || body != c.want || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %q (%s, %q)\nwant %d %q (text/plain; charset=utf-8, nosniff)", c.name, code, body, h.Get("Content-Type"), h.Get("X-Content-Type-Options"), c.status, c.want)
		}
	}
	// Enabling a proxy whose address was taken meanwhile: the same.
	call(t, s, "POST", "/proxies", `{"name":"late","listen":"127.0.0.1:`+port+`","upstream":"127.0.0.1:1","enabled":false}`)
	if code, _, body := rawCall(t, s, "POST", "/proxies/late", `{"enabled":true}`); code != 500 || body != inUse {
		t.Errorf("enabling on a taken port: %d %q, want 500 %q", code, body, inUse)
	}
}

// Populate's errors are in its own answer, as Toxiproxy writes it:
// application/json, the error, its status and the proxies made before
// it, "proxies": null when there are none, no newline after it.
func TestPopulateErrorsAreToxiproxys(t *testing.T) {
	s := newServer(t)
	port := takenPort(t)
	code, h, body := rawCall(t, s, "POST", "/populate", `[{"name":"first","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"},{"name":"second","listen":"127.0.0.1:`+port+`","upstream":"127.0.0.1:1"}]`)
	_, first := answer(t, s, "GET", "/proxies/first", "")
	want := `{"error":"listen tcp 127.0.0.1:` + port + `: bind: address already in use","status":500,"proxies":[` + first + `]}`
	if code != 500 || body != want || h.Get("Content-Type") != "application/json" {
		t.Errorf("a listen in use:\n%d %s %s\nwant 500 application/json %s", code, h.Get("Content-Type"), body, want)
	}
	for _, c := range []struct {
		name, body, want string
		status           int
	}{
		{"no name", `[{"upstream":"127.0.0.1:1"}]`, `{"error":"missing required field: name at proxy 1","status":400,"proxies":null}`, 400},
		{"no upstream", `[{"name":"a","upstream":"127.0.0.1:1"},{"name":"b"}]`, `{"error":"missing required field: upstream at proxy 2","status":400,"proxies":null}`, 400},
		{"listen in use first", `[{"name":"third","listen":"127.0.0.1:` + port + `","upstream":"127.0.0.1:1"}]`, `{"error":"listen tcp 127.0.0.1:` + port + `: bind: address already in use","status":500,"proxies":null}`, 500},
		{"an empty list", `[]`, `{"proxies":null}`, 201},
	} {
		code, h, body := rawCall(t, s, "POST", "/populate", c.body)
		if code != c.status || body != c.want || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s:\n%d %s %s\nwant %d application/json %s", c.name, code, h.Get("Content-Type"), body, c.status, c.want)
		}
	}
	code, _, body = rawCall(t, s, "POST", "/populate", `[{"name":`)
	if !strings.HasPrefix(body, `{"error":"bad request body: `) || !strings.HasSuffix(body, `","status":400,"proxies":null}`) || code != 400 {
		t.Errorf("a body that is not JSON: %d %s", code, body)
	}
}

// freePort is a loopback port nothing listens on, for a proxy to take.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	return port
}

// A proxy populated again with the same listen and upstream is left as
// it is, its toxics and connections kept, as Toxiproxy 2.12.0 compares
// them: the listen resolved (localhost:N is the 127.0.0.1:N the proxy
// reports), the upstream as written. Another upstream replaces it.
func TestPopulateKeepsAProxyWhoseListenResolvesTheSame(t *testing.T) {
	s := newServer(t)
	up := echoUpstream(t)
	port := freePort(t)
	list := `[{"name":"db","listen":"localhost:` + port + `","upstream":"` + up + `"}]`
	if code, body := call(t, s, "POST", "/populate", list); code != 201 {
		t.Fatalf("populate: %d %s", code, body)
	}
	if code, body := call(t, s, "POST", "/proxies/db/toxics", `{"name":"kept","type":"noop"}`); code != 200 {
		t.Fatalf("toxic: %d %s", code, body)
	}
	c := dialProxy(t, "127.0.0.1:"+port)
	echoes(t, c, "before")
	code, body := answer(t, s, "POST", "/populate", list)
	_, db := answer(t, s, "GET", "/proxies/db", "")
	if want := `{"proxies":[` + db + `]}`; code != 201 || body != want || !strings.Contains(db, `"listen":"127.0.0.1:`+port+`"`) || !strings.Contains(db, `"name":"kept"`) {
		t.Fatalf("populated again: %d %s\nwant 201 %s, listening on 127.0.0.1:%s with its toxic", code, body, want, port)
	}
	echoes(t, c, "the same connection")
	// Another upstream is another proxy: the old one's connections end
	// and its toxics go.
	other := `[{"name":"db","listen":"localhost:` + port + `","upstream":"localhost:` + strings.TrimPrefix(up, "127.0.0.1:") + `"}]`
	if code, body := answer(t, s, "POST", "/populate", other); code != 201 || strings.Contains(body, `"kept"`) {
		t.Fatalf("another upstream: %d %s, want the proxy replaced, without its toxic", code, body)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("the replaced proxy's connection is still open: read %d bytes", n)
	}
	echoes(t, dialProxy(t, "127.0.0.1:"+port), "the new proxy")
}

// GET /version is 2.12.0's answer, byte for byte.
func TestVersionIsToxiproxy2120s(t *testing.T) {
	code, h, body := rawCall(t, newServer(t), "GET", "/version", "")
	if want := `{"version": "2.12.0"}` + "\n"; code != 200 || body != want || h.Get("Content-Type") != "application/json;charset=utf-8" {
		t.Errorf("GET /version: %d %q (%s), want 200 %q (application/json;charset=utf-8)", code, body, h.Get("Content-Type"), want)
	}
}

// An update whose listen resolves to the proxy's own (localhost:N for
// 127.0.0.1:N) changes nothing, as Toxiproxy 2.12.0 compares it: the
// proxy is not restarted and its connections live on.
func TestAnUpdateToTheSameListenByNameKeepsTheProxy(t *testing.T) {
	s := newServer(t)
	p := makeProxy(t, s, "db", "127.0.0.1:0", echoUpstream(t))
	c := dialProxy(t, p.Listen)
	echoes(t, c, "before")
	_, port, _ := net.SplitHostPort(p.Listen)
	if code, body := call(t, s, "PATCH", "/proxies/db", `{"listen":"localhost:`+port+`"}`); code != 200 || !strings.Contains(body, `"listen":"127.0.0.1:`+port+`"`) {
		t.Fatalf("update: %d %s", code, body)
	}
	echoes(t, c, "the same connection")
}
