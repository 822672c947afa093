package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// mintedID is the form of a request id Doppel mints (1.1's).
var mintedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestResolution(t *testing.T) {
	up := map[string]*httptest.Server{}
	for _, name := range []string{"zeta", "alpha", "beta", "fallback"} {
		name := name
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, h := range []string{"X-Backend", "X-Other"} {
				if r.Header.Get(h) != "" {
					w.Header().Set("X-Leaked", h)
				}
			}
			fmt.Fprint(w, name)
		}))
		t.Cleanup(srv.Close)
		up[name] = srv
	}
	// zeta is declared before alpha on purpose: order, not names, decides.
	src := head + "proxies:\n" +
		"  - {name: zeta, type: http, url: '" + up["zeta"].URL + "', resolve: {type: header, header: X-Backend}}\n" +
		"  - {name: alpha, type: http, url: '" + up["alpha"].URL + "', resolve: {type: header, header: X-Backend}}\n" +
		"  - {name: beta, type: http, url: '" + up["beta"].URL + "', resolve: {type: header, header: X-Other}}\n" +
		"  - {name: fallback, type: http, url: '" + up["fallback"].URL + "'}\n"
	d := start(t, src, nil)
	cases := []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"by header", map[string]string{"X-Backend": "alpha"}, "alpha"},
		{"header name is case-insensitive", map[string]string{"x-backend": "zeta"}, "zeta"},
		{"other header", map[string]string{"X-Other": "beta"}, "beta"},
		{"name only through its own header", map[string]string{"X-Backend": "beta"}, "fallback"},
		{"unknown name goes to the default", map[string]string{"X-Backend": "nobody"}, "fallback"},
		{"value is exact", map[string]string{"X-Backend": "Alpha"}, "fallback"},
		{"two headers: the proxy written first wins", map[string]string{"X-Other": "beta", "X-Backend": "alpha"}, "alpha"},
		{"no header", nil, "fallback"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, body := get(t, d.URL+"/", c.header)
			if string(body) != c.want {
				t.Fatalf("reached %q, want %q", body, c.want)
			}
			if leaked := res.Header.Get("X-Leaked"); leaked != "" {
				t.Fatalf("resolution header %s reached the upstream", leaked)
			}
		})
	}

	t.Run("no default", func(t *testing.T) {
		d := start(t, head+"proxies: [{name: zeta, type: http, url: '"+up["zeta"].URL+"', resolve: {type: header, header: X-Backend}}]\n", nil)
		res, body := get(t, d.URL+"/x", nil)
		envelopeSays(t, res, body, 404, "PROXY_NOT_RESOLVED", "no proxy matched the request and no default proxy is configured")
	})
	t.Run("no proxies", func(t *testing.T) {
		d := start(t, head, nil)
		res, body := get(t, d.URL+"/x", nil)
		envelope(t, res, body, 503, "NO_PROXIES_CONFIGURED")
	})
}

func TestURLJoiningAndQuery(t *testing.T) {
	up := echo(t)
	cases := []struct{ base, request, want string }{
		{"/api/v1", "/r/42", "/api/v1/r/42"},
		{"/api/v1/", "/r/42", "/api/v1/r/42"},
		{"/", "/r/42", "/r/42"},
		{"", "/", "/"},
		{"/api", "/x?b=2&a=1&a=0", "/api/x?b=2&a=1&a=0"},
		{"/api", "/x?semi=1;2&sp=%20&raw=a+b", "/api/x?semi=1;2&sp=%20&raw=a+b"},
		{"/api", "/x?", "/api/x?"},
		{"/", "/x%2Fy", "/x%2Fy"},
		{"/", "/caf%C3%A9", "/caf%C3%A9"},
		{"/", "/caf%c3%a9", "/caf%c3%a9"},
		{"/", "/a//b/", "/a//b/"},
		{"/api", "//lead", "/api//lead"},
		{"/", "/a..b/..c/d..", "/a..b/..c/d.."},
		{"/", "/%7Euser/a%20b", "/%7Euser/a%20b"},
	}
	for _, c := range cases {
		t.Run(c.base+" + "+c.request, func(t *testing.T) {
			d := start(t, oneProxy(up.URL+c.base, ""), nil)
			got := rawGet(t, d.Listener.Addr().String(), c.request, nil)
			if got.RequestURI != c.want {
				t.Fatalf("upstream saw %q, want %q", got.RequestURI, c.want)
			}
		})
	}
}

// rawGet sends a request line exactly as written, which net/http's client
// would normalise.
func rawGet(t *testing.T, addr, target string, header map[string]string) seen {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: doppel.test\r\nConnection: close\r\n", target)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return seen{RequestURI: fmt.Sprintf("status %d: %s", res.StatusCode, body)}
	}
	return decodeSeen(t, body)
}

func TestConfinement(t *testing.T) {
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, r.RequestURI)
	}))
	defer up.Close()
	d := start(t, oneProxy(up.URL+"/base/", ""), nil)
	addr := d.Listener.Addr().String()
	refused := []string{
		"/..", "/../etc/passwd", "/a/../../x", "/%2e%2e/x", "/%2E%2e/x", "/.%2e/x", "/%2e./x",
		"/a/%2E%2E", "/..%2fx", "/%2e%2e%2fx", "/..;/admin", "/a/%2e%2e;jsessionid=1/x", `/a\..\x`, "/a%5c..%5cx", "/a%5C..", "/x\\y",
	}
	for _, target := range refused {
		t.Run(target, func(t *testing.T) {
			res := rawStatus(t, addr, "GET "+target+" HTTP/1.1")
			if res.status != 400 || !strings.Contains(res.body, "INVALID_REQUEST_PATH") {
				t.Fatalf("%s answered %d %s", target, res.status, res.body)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	t.Run("absolute-form target keeps the authority", func(t *testing.T) {
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t.Error("the absolute-form authority was contacted")
		}))
		defer evil.Close()
		res := rawStatus(t, addr, "GET "+evil.URL+"/x?q=1 HTTP/1.1")
		if res.status != 200 || res.body != "/base/x?q=1" {
			t.Fatalf("got %d %q, want the proxy's own upstream at /base/x?q=1", res.status, res.body)
		}
		res = rawStatus(t, addr, "GET "+evil.URL+"/../x HTTP/1.1")
		if res.status != 400 {
			t.Fatalf("absolute-form traversal answered %d", res.status)
		}
	})
	t.Run("ordinary names with dots pass", func(t *testing.T) {
		res := rawStatus(t, addr, "GET /a..b/.hidden/x. HTTP/1.1")
		if res.status != 200 || res.body != "/base/a..b/.hidden/x." {
			t.Fatalf("got %d %q", res.status, res.body)
		}
	})
	t.Run("asterisk target", func(t *testing.T) {
		res := rawStatus(t, addr, "OPTIONS * HTTP/1.1")
		if res.status != 400 {
			t.Fatalf("OPTIONS * answered %d", res.status)
		}
	})
}

type rawResult struct {
	status int
	body   string
}

func rawStatus(t *testing.T, addr, requestLine string) rawResult {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s\r\nHost: doppel.test\r\nConnection: close\r\n\r\n", requestLine)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return rawResult{res.StatusCode, string(b)}
}

func TestHeadersOnTheWayUp(t *testing.T) {
	up := echo(t)
	d := start(t, oneProxy(up.URL, "headers: {X-Injected: doppel, Authorization: Bearer upstream}"), nil)
	upHost := strings.TrimPrefix(up.URL, "http://")

	t.Run("hop-by-hop, host, injection", func(t *testing.T) {
		got := rawGet(t, d.Listener.Addr().String(), "/", map[string]string{
			"Connection":          "close, X-Named-Hop",
			"X-Named-Hop":         "1",
			"Keep-Alive":          "timeout=5",
			"Proxy-Authorization": "Basic eA==",
			"Proxy-Connection":    "keep-alive",
			"TE":                  "trailers",
			"Upgrade-Insecure":    "kept",
			"Authorization":       "Bearer client",
			"X-Injected":          "client",
			"X-Forwarded-Port":    "8443",
			"Forwarded":           "for=192.0.2.1",
		})
		for _, h := range []string{"X-Named-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Connection"} {
			if v, ok := got.Header[h]; ok {
				t.Errorf("hop-by-hop %s reached the upstream: %v", h, v)
			}
		}
		if got.Host != upHost {
			t.Errorf("upstream saw Host %q, want its own %q", got.Host, upHost)
		}
		want := map[string]string{
			"X-Injected":        "doppel",
			"Authorization":     "Bearer upstream",
			"Upgrade-Insecure":  "kept",
			"X-Forwarded-Port":  "8443",
			"Forwarded":         "for=192.0.2.1",
			"X-Forwarded-For":   "127.0.0.1",
			"X-Forwarded-Host":  "doppel.test",
			"X-Forwarded-Proto": "http",
		}
		for k, v := range want {
			if got := strings.Join(got.Header[k], ","); got != v {
				t.Errorf("upstream saw %s %q, want %q", k, got, v)
			}
		}
		if _, ok := got.Header["Accept-Encoding"]; ok {
			t.Error("Accept-Encoding was added")
		}
	})
	t.Run("forwarded headers kept or appended", func(t *testing.T) {
		got := rawGet(t, d.Listener.Addr().String(), "/", map[string]string{
			"X-Forwarded-For":   "198.51.100.7",
			"X-Forwarded-Host":  "public.example",
			"X-Forwarded-Proto": "https",
		})
		for k, v := range map[string]string{
			"X-Forwarded-For":   "198.51.100.7, 127.0.0.1",
			"X-Forwarded-Host":  "public.example",
			"X-Forwarded-Proto": "https",
		} {
			if got := strings.Join(got.Header[k], ","); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("request id reused or minted", func(t *testing.T) {
		res, body := get(t, d.URL+"/", map[string]string{"X-Request-ID": "abc-123"})
		if res.Header.Get("X-Request-Id") != "abc-123" || decodeSeen(t, body).Header["X-Request-Id"][0] != "abc-123" {
			t.Fatalf("the client's request id was not reused both ways")
		}
		res, body = get(t, d.URL+"/", nil)
		id := res.Header.Get("X-Request-Id")
		if !mintedID.MatchString(id) {
			t.Fatalf("minted request id %q is not 32 lowercase hex digits", id)
		}
		if decodeSeen(t, body).Header["X-Request-Id"][0] != id {
			t.Fatal("the upstream saw another request id than the client got")
		}
	})
}

func TestURLCredentialsBecomeBasicAuth(t *testing.T) {
	up := echo(t)
	d := start(t, oneProxy(strings.Replace(up.URL, "http://", "http://svc:s3cret@", 1), ""), nil)
	_, body := get(t, d.URL+"/", map[string]string{"Authorization": "Bearer client"})
	if got := decodeSeen(t, body).Header["Authorization"]; len(got) != 1 || got[0] != "Basic c3ZjOnMzY3JldA==" {
		t.Fatalf("upstream saw Authorization %v", got)
	}
}

func TestResponsesComeBackUntouched(t *testing.T) {
	gz := func() []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(strings.Repeat("compressible ", 100)))
		_ = w.Close()
		return b.Bytes()
	}()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "https://elsewhere.example/next", http.StatusFound)
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(gz)
		case "/hop":
			w.Header().Set("Connection", "X-Resp-Hop")
			w.Header().Set("X-Resp-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("Proxy-Authenticate", "Basic")
			w.Header().Set("X-End", "kept")
		case "/error":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "upstream's own 503")
		}
	}))
	defer up.Close()
	d := start(t, oneProxy(up.URL, "rewrite_redirects: false\nrewrite_urls: false"), nil)

	res, _ := get(t, d.URL+"/redirect", nil)
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "https://elsewhere.example/next" {
		t.Fatalf("a redirect was not relayed as is: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	res, body := get(t, d.URL+"/gzip", nil)
	if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, gz) {
		t.Fatal("an encoded body did not pass byte for byte")
	}
	res, _ = get(t, d.URL+"/hop", nil)
	for _, h := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if res.Header.Get(h) != "" {
			t.Errorf("response hop-by-hop %s reached the client", h)
		}
	}
	if res.Header.Get("X-End") != "kept" || res.Header.Get("X-Request-Id") == "" {
		t.Error("end-to-end headers or X-Request-ID missing on the response")
	}
	res, body = get(t, d.URL+"/error", nil)
	if res.StatusCode != 503 || string(body) != "upstream's own 503" {
		t.Fatalf("an upstream error was rewritten: %d %s", res.StatusCode, body)
	}
}

func TestUpstreamFailures(t *testing.T) {
	t.Run("timeout is 504", func(t *testing.T) {
		block := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}))
		defer up.Close()
		defer close(block)
		d := start(t, oneProxy(up.URL, "timeout: 1"), nil)
		began := time.Now()
		res, body := get(t, d.URL+"/", nil)
		envelopeSays(t, res, body, 504, "UPSTREAM_TIMEOUT", "upstream timed out")
		if el := time.Since(began); el < 900*time.Millisecond || el > 10*time.Second {
			t.Errorf("the timeout fired after %v, want about 1s", el)
		}
	})
	t.Run("refused is 502", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		d := start(t, oneProxy("http://"+addr, ""), nil)
		res, body := get(t, d.URL+"/", nil)
		envelope(t, res, body, 502, "UPSTREAM_ERROR")
	})
	t.Run("broken before headers is 502", func(t *testing.T) {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := http.NewResponseController(w).Hijack()
			_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Le"))
			conn.Close()
		}))
		defer up.Close()
		d := start(t, oneProxy(up.URL, ""), nil)
		res, body := get(t, d.URL+"/", nil)
		envelope(t, res, body, 502, "UPSTREAM_ERROR")
	})
	t.Run("broken mid-body aborts the client's response", func(t *testing.T) {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := http.NewResponseController(w).Hijack()
			_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial"))
			conn.Close()
		}))
		defer up.Close()
		d := start(t, oneProxy(up.URL, ""), nil)
		// The status is gone by the time the body breaks: the client must
		// see a broken response, not a complete one.
		res, err := http.Get(d.URL + "/")
		if err == nil {
			defer res.Body.Close()
			_, err = io.ReadAll(res.Body)
		}
		if err == nil {
			t.Fatal("a truncated upstream body reached the client as complete")
		}
	})
}

func TestLossAnswersAtOnce(t *testing.T) {
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer up.Close()
	d := start(t, oneProxy(up.URL, "loss: {percentage: 1, status: 429}\nlatency: {percentage: 1, min: 2, max: 2}"), nil)
	began := time.Now()
	res, body := get(t, d.URL+"/", nil)
	envelope(t, res, body, 429, "LOSS_INJECTED")
	if el := time.Since(began); el > time.Second {
		t.Fatalf("a dropped request waited %v: drops are never delayed", el)
	}
	if reached.Load() != 0 {
		t.Fatal("a dropped request reached the upstream")
	}
	lines := d.logs.lines(t, 1)
	if len(lines) != 1 || lines[0]["loss_injected"] != true || lines[0]["latency_injected_ms"] != 0.0 || lines[0]["upstream_contacted"] != false {
		t.Fatalf("log line %v", lines)
	}
}

func TestLatencyIsATargetForTheWholeResponse(t *testing.T) {
	slowUpstream := func(d time.Duration) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(d)
			fmt.Fprint(w, "ok")
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	cases := []struct {
		name          string
		upstream      time.Duration
		target        string
		least, most   time.Duration
		waitedAtLeast time.Duration
	}{
		// 200ms upstream under a 600ms target: about 400ms is waited.
		{"upstream faster than the target", 200 * time.Millisecond, "0.6", 600 * time.Millisecond, 2500 * time.Millisecond, 300 * time.Millisecond},
		// 700ms upstream under a 300ms target: nothing is added.
		{"upstream slower than the target", 700 * time.Millisecond, "0.3", 700 * time.Millisecond, 2500 * time.Millisecond, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := slowUpstream(c.upstream)
			d := start(t, oneProxy(up.URL, "latency: {percentage: 1, min: "+c.target+", max: "+c.target+"}"), nil)
			began := time.Now()
			get(t, d.URL+"/", nil)
			el := time.Since(began)
			if el < c.least || el > c.most {
				t.Fatalf("answered after %v, want %v..%v", el, c.least, c.most)
			}
			waited := d.logs.lines(t, 1)[0]["latency_injected_ms"].(float64)
			if time.Duration(waited*float64(time.Millisecond)) < c.waitedAtLeast {
				t.Fatalf("logged latency_injected_ms %v, want at least %v", waited, c.waitedAtLeast)
			}
			if c.waitedAtLeast == 0 && waited > 50 {
				t.Fatalf("a slow upstream was delayed further by %vms", waited)
			}
		})
	}
	t.Run("applies to errors too, draws within bounds", func(t *testing.T) {
		d := start(t, head+"proxies: [{name: zeta, type: http, url: 'http://127.0.0.1:1', resolve: {type: header, header: X-P}, latency: {percentage: 1, min: 0.2, max: 0.4}}]\n", nil)
		began := time.Now()
		res, _ := get(t, d.URL+"/", map[string]string{"X-P": "zeta"})
		if el := time.Since(began); res.StatusCode != 502 || el < 200*time.Millisecond || el > 2*time.Second {
			t.Fatalf("%d after %v", res.StatusCode, el)
		}
	})
}

func TestFaultRates(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	d := start(t, oneProxy(up.URL, "loss: {percentage: 0.3, status: 503}"), newSeeded(42))
	const n = 1000
	dropped := 0
	for range n {
		res, _ := get(t, d.URL+"/", nil)
		if res.StatusCode == 503 {
			dropped++
		}
	}
	// Seeded: the count is fixed; the bounds still say what the rate means.
	if dropped < 250 || dropped > 350 {
		t.Fatalf("dropped %d of %d at loss 0.3", dropped, n)
	}
}

func TestFixedRollsDecideExactly(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	cfg := oneProxy(up.URL, "loss: {percentage: 0.5, status: 503}")
	if res, _ := get(t, start(t, cfg, fixed{fault.RollLoss: 0.49}).URL, nil); res.StatusCode != 503 {
		t.Fatal("a roll under the share did not drop")
	}
	if res, _ := get(t, start(t, cfg, fixed{fault.RollLoss: 0.5}).URL, nil); res.StatusCode != 200 {
		t.Fatal("a roll at the share dropped")
	}
}

type panicky struct{}

func (panicky) Float64(fault.Key) float64 { panic("roller broke") }

func TestPanicIsAnEnvelope(t *testing.T) {
	d := start(t, oneProxy("http://127.0.0.1:1", "loss: {percentage: 0.5, status: 503}"), panicky{})
	res, body := get(t, d.URL+"/", nil)
	envelope(t, res, body, 500, "INTERNAL_ERROR")
	if len(d.logs.lines(t, 1)) != 1 {
		t.Fatal("a panicking request was not logged")
	}
}

func TestRequestLogLines(t *testing.T) {
	up := echo(t)
	d := start(t, head+"proxies:\n  - {name: zeta, type: http, url: '"+up.URL+"', resolve: {type: header, header: X-P}}\n", nil)
	get(t, d.URL+"/a/b?secret=1", map[string]string{"X-P": "zeta"})
	get(t, d.URL+"/unresolved?q=2", nil)
	lines := d.logs.lines(t, 2)
	if len(lines) != 2 {
		t.Fatalf("%d request lines, want 2", len(lines))
	}
	keys := func(m map[string]any) string {
		var ks []string
		for _, k := range []string{"request_id", "proxy", "mock", "method", "path", "status", "duration_ms", "upstream_contacted", "upstream_status", "upstream_duration_ms", "loss_injected", "latency_injected_ms"} {
			if _, ok := m[k]; ok {
				ks = append(ks, k)
			}
		}
		return strings.Join(ks, " ")
	}
	forwarded, unresolved := lines[0], lines[1]
	if got := keys(forwarded); got != "request_id proxy method path status duration_ms upstream_contacted upstream_status upstream_duration_ms loss_injected latency_injected_ms" {
		t.Errorf("forwarded line keys: %s", got)
	}
	if forwarded["path"] != "/a/b" || forwarded["proxy"] != "zeta" || forwarded["status"] != 200.0 || forwarded["upstream_status"] != 200.0 {
		t.Errorf("forwarded line: %v", forwarded)
	}
	if got := keys(unresolved); got != "request_id proxy method path status duration_ms upstream_contacted loss_injected latency_injected_ms" {
		t.Errorf("unresolved line keys: %s", got)
	}
	if unresolved["proxy"] != "" || unresolved["status"] != 404.0 || unresolved["path"] != "/unresolved" {
		t.Errorf("unresolved line: %v", unresolved)
	}
	if forwarded["message"] != "request proxied" || unresolved["message"] != "request rejected" ||
		unresolved["error_code"] != "PROXY_NOT_RESOLVED" || forwarded["level"] != "INFO" || unresolved["level"] != "INFO" {
		t.Errorf("the lines' messages and levels: %v, %v", forwarded, unresolved)
	}
}

// An upstream that refuses the connection was contacted, and failed: the
// line is a warning, with no upstream status or duration.
func TestRequestLogLineOfARefusedUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	d := start(t, oneProxy(refused, ""), nil)
	res, _ := get(t, d.URL+"/x", nil)
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", res.StatusCode)
	}
	lines := d.logs.lines(t, 1)
	if len(lines) != 1 {
		t.Fatalf("%d request lines, want 1", len(lines))
	}
	l := lines[0]
	if l["message"] != "upstream failed" || l["level"] != "WARN" || l["upstream_contacted"] != true ||
		l["upstream_status"] != nil || l["upstream_duration_ms"] != nil || l["error_code"] != "UPSTREAM_ERROR" || l["cause"] != "connection_refused" {
		t.Errorf("the line of a refused upstream: %v", l)
	}
}

func TestReloadSwapsWithoutDisturbingInFlight(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		fmt.Fprint(w, "old")
	}))
	defer slow.Close()
	fresh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "new") }))
	defer fresh.Close()
	d := start(t, oneProxy(slow.URL, ""), nil)
	done := make(chan string)
	go func() {
		res, err := http.Get(d.URL + "/")
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		done <- string(b)
	}()
	<-arrived // the request is in flight on the old runtime
	doc, _ := config.Load([]byte(oneProxy(fresh.URL, "")))
	rt, _ := runtime.Compile(doc)
	d.holder.Swap(rt)
	if _, body := get(t, d.URL+"/", nil); string(body) != "new" {
		t.Fatalf("a request after the swap reached %q", body)
	}
	close(release)
	if got := <-done; got != "old" {
		t.Fatalf("the in-flight request got %q", got)
	}
}

type panicBody struct{ sent bool }

func (b *panicBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "partial"), nil
	}
	panic("the body broke")
}

func (b *panicBody) Close() error { return nil }

type panicTransport struct{}

func (panicTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Header: http.Header{}, Body: &panicBody{},
		ContentLength: -1, Request: r, ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// TestPanicAfterTheAnswerBeganAbortsIt: once the status is out, a panic
// must break the connection, never end a cut body cleanly.
func TestPanicAfterTheAnswerBeganAbortsIt(t *testing.T) {
	doc, _ := config.Load([]byte(oneProxy("http://127.0.0.1:1", "")))
	rt, _ := runtime.Compile(doc)
	srv := httptest.NewServer(New(runtime.NewHolder(rt), Options{Transport: panicTransport{}}))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/")
	if err == nil {
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
	}
	if err == nil {
		t.Fatal("a body cut by a panic reached the client as complete")
	}
}
