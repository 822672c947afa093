package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExampleMocksAnswerAsTheirCommentsSay runs the real binary on
// examples/main.yaml and asks the offline `shop` proxy every question its
// comments answer.
func TestExampleMocksAnswerAsTheirCommentsSay(t *testing.T) {
	t.Parallel()
	p := startProc(t, invocation{
		args: []string{"serve", "--config", exampleCopy(t), "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "doppel.sock")},
		dir:  t.TempDir(),
	})
	base := "http://" + p.waitServing()
	shop := map[string]string{"X-Backend": "shop"}
	c := newClient()
	send := func(method, path string, header map[string]string, body string) response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, p)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	cases := []struct {
		method, path string
		header       map[string]string
		body         string
		status       int
		want         string
		contentType  string
	}{
		{"GET", "/products/42", shop, "", 200, `{"id": 42, "name": "Product 42", "page": "1"}`, "application/json"},
		{"GET", "/products/42?page=3", shop, "", 200, `{"id": 42, "name": "Product 42", "page": "3"}`, "application/json"},
		{"POST", "/orders", map[string]string{"X-Backend": "shop", "X-Customer": "acme"}, `{"items": [1, 2, 3]}`, 201, `{"customer": "acme", "items": 3}`, "application/json"},
		{"POST", "/orders", shop, `{"items": []}`, 201, `{"customer": "anonymous", "items": 0}`, "application/json"},
		{"GET", "/health", shop, "", 200, "ok from shop", "text/plain; charset=utf-8"},
		// The catch-alls: one per method a client usually sends, so that
		// nothing of these reaches the upstream that is not there.
		{"GET", "/no/such/thing", shop, "", 404, `{"error": "no such endpoint", "method": "GET", "path": "/no/such/thing"}`, "application/json"},
		{"HEAD", "/health", shop, "", 404, "", "application/json"},
		{"POST", "/orders/7", shop, `{"items": []}`, 404, `{"error": "no such endpoint", "method": "POST", "path": "/orders/7"}`, "application/json"},
		{"PUT", "/orders/7", shop, `{}`, 404, `{"error": "no such endpoint", "method": "PUT", "path": "/orders/7"}`, "application/json"},
		{"PATCH", "/products/42", shop, `{}`, 404, `{"error": "no such endpoint", "method": "PATCH", "path": "/products/42"}`, "application/json"},
		{"DELETE", "/products/42", shop, "", 404, `{"error": "no such endpoint", "method": "DELETE", "path": "/products/42"}`, "application/json"},
		{"OPTIONS", "/", shop, "", 404, `{"error": "no such endpoint", "method": "OPTIONS", "path": "/"}`, "application/json"},
	}
	for _, c := range cases {
		r := send(c.method, c.path, c.header, c.body)
		if r.status != c.status || string(r.body) != c.want || r.header.Get("Content-Type") != c.contentType {
			t.Errorf("%s %s: %d %q (%s), want %d %q (%s)", c.method, c.path, r.status, r.body, r.header.Get("Content-Type"), c.status, c.want, c.contentType)
		}
		if r.header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-ID", c.method, c.path)
		}
	}
	if r := send("GET", "/products/7", shop, ""); r.header.Get("X-Served-By") != "mock product" {
		t.Errorf("X-Served-By = %q", r.header.Get("X-Served-By"))
	}
	// What the comments say is left to the upstream where nothing listens,
	// and what a body that is not JSON gets.
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"TRACE", "/anything", "", 502, "UPSTREAM_ERROR"},
		{"POST", "/orders", "not json", 500, "BODY_EXTRACTION_ERROR"},
	} {
		r := send(c.method, c.path, shop, c.body)
		if r.status != c.status || envelopeCode(t, string(r.body)) != c.code {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, r.status, r.body, c.status, c.code)
		}
	}
	// DELETE answers 204 with no body; one time in five it takes 1 to 2 s.
	slow := 0
	for range 20 {
		began := time.Now()
		r := send("DELETE", "/orders/7", shop, "")
		if r.status != 204 || len(r.body) != 0 {
			t.Fatalf("DELETE /orders/7: %d %q", r.status, r.body)
		}
		if el := time.Since(began); el >= time.Second {
			slow++
		} else if el > 900*time.Millisecond {
			t.Errorf("a DELETE took %v: neither quick nor delayed by the mock's latency", el)
		}
	}
	if slow == 0 || slow > 12 {
		t.Errorf("%d of 20 DELETEs were slow; the example says one in five", slow)
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("want exit 0:\n%s", p)
	}
}

// TestServeExternalAddress: redirects from an upstream are rewritten to
// Doppel's own address, which is the listener's by default (a wildcard bind
// read as loopback), or DOPPEL_EXTERNAL_URL; the address is logged at
// startup, and a malformed one refuses to start.
func TestServeExternalAddress(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/v2/next")
		w.WriteHeader(http.StatusFound)
	})
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("zeta", up.URL+"/v2/", ""))
	cases := []struct {
		name, addr, env, want, source string
	}{
		{"listener, wildcard as loopback", "0.0.0.0:0", "", "http://127.0.0.1:PORT/next", "the proxy listener"},
		{"environment", "127.0.0.1:0", "https://public.example/pre", "https://public.example/pre/next", "DOPPEL_EXTERNAL_URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			if c.env != "" {
				env[envExternalURL] = c.env
			}
			p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", c.addr}, env: env})
			addr := p.waitServing()
			_, port, _ := net.SplitHostPort(addr)
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			res, err := client.Get("http://127.0.0.1:" + port + "/x")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			want := strings.ReplaceAll(c.want, "PORT", port)
			if got := res.Header.Get("Location"); got != want {
				t.Errorf("Location %q, want %q", got, want)
			}
			if !strings.Contains(p.stdout(), `"source":"`+c.source+`"`) || !strings.Contains(p.stdout(), `"external_url":"`+strings.TrimSuffix(strings.ReplaceAll(c.want, "PORT", port), "/next")) {
				t.Errorf("the address was not logged at startup:\n%s", p.stdout())
			}
			p.signal(syscall.SIGTERM)
			p.waitExit(exitTimeout)
		})
	}
	t.Run("malformed", func(t *testing.T) {
		r := doppel(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0"}, env: map[string]string{envExternalURL: "ftp://x/"}})
		if r.code != 1 || !strings.Contains(r.stderr, envExternalURL) {
			t.Fatalf("want exit 1 naming %s: %s", envExternalURL, r)
		}
	})
}

// exampleCopy copies examples/main.yaml into a temporary directory: serve
// writes a lock file beside the document it serves, and the repository
// must stay clean.
func exampleCopy(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(repoPath(t, "examples/main.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, t.TempDir(), "main.yaml", string(src))
}
