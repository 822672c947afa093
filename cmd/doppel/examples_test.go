package main

import (
	"io"
	"net/http"
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
		args: []string{"serve", "--config", repoPath(t, "examples/main.yaml"), "--proxy-addr", "127.0.0.1:0"},
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
		{"GET", "/no/such/thing", shop, "", 404, `{"error": "no such endpoint", "path": "/no/such/thing"}`, "application/json"},
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
