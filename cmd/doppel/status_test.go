package main

// A 1xx status (a mock's, a loss's) loads everywhere Doppel 1.1's does, and
// what a client gets for it is what the startup advisory says: 101 is the
// final answer, bodiless, and the connection is closed; any other 1xx is an
// interim response, and the answer then completes as 200. The answers are
// read off the wire, since an HTTP client hides interim responses.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const informationalProxies = `proxies:
  - name: sink
    type: http
    url: %s
    mocks:
      - name: processing
        request: {method: GET, url: "^/processing$"}
        response:
          status: 102
          body: done
          headers: {X-Served-By: "mock {{ mock_name }}"}
      - name: switching
        request: {method: GET, url: "^/switching$"}
        response:
          status: 101
          body: never sent
          headers: {X-Served-By: "mock {{ mock_name }}"}
      - name: lost
        request: {method: GET, url: "^/lost$"}
        response: {status: 200, body: never sent}
        proxy: {loss: {percentage: 1.0, status: 100}}
      - name: lost-switching
        request: {method: GET, url: "^/lost-switching$"}
        response: {status: 200, body: never sent}
        proxy: {loss: {percentage: 1.0, status: 101}}
`

// rawAnswer is every response one request got on its own connection, in
// order, and whether the connection was then closed by Doppel.
type rawAnswer struct {
	responses []*http.Response
	bodies    []string
	closed    bool
}

// rawGet sends GET path on a fresh connection and reads responses until a
// final one (or EOF), then whether the server closes the connection: an
// HTTP client would skip the interim responses this is about.
func rawGet(t *testing.T, addr, path string, header map[string]string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: doppel.test\r\n"
	for k, v := range header {
		req += k + ": " + v + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	var a rawAnswer
	br := bufio.NewReader(c)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: reading response %d: %v", path, len(a.responses)+1, err)
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("GET %s: reading the body of %d: %v", path, res.StatusCode, err)
		}
		a.responses = append(a.responses, res)
		a.bodies = append(a.bodies, string(body))
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	// What follows the final answer: nothing, then EOF when Doppel closes
	// the connection; a timeout when it keeps it open for another request.
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := br.Read(make([]byte, 1))
	switch {
	case n > 0:
		t.Errorf("GET %s: bytes after the final answer", path)
	case errors.Is(err, io.EOF):
		a.closed = true
	case !errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("GET %s: after the final answer: %v", path, err)
	}
	return a
}

// statuses is the status of each response, in order.
func (a rawAnswer) statuses() []int {
	var s []int
	for _, r := range a.responses {
		s = append(s, r.StatusCode)
	}
	return s
}

func TestServeInformationalStatus(t *testing.T) {
	t.Parallel()
	var contacted atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		contacted.Add(1)
		_, _ = io.WriteString(w, "upstream")
	})
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, fmt.Sprintf(informationalProxies, up.URL))

	if r := doppel(t, invocation{args: []string{"config", "validate", "--config", cfg}}); r.code != wantOK || !strings.HasSuffix(r.stdout, "\nconfiguration is valid\n") || strings.Count(r.stdout, "advisory: ") != 4 {
		t.Fatalf("config validate refuses 1xx statuses:\n%s", r)
	}

	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	addr := p.waitServing()
	adminAddr := lineField(p.waitLine("the admin listener", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")

	t.Run("mock 102", func(t *testing.T) {
		a := rawGet(t, addr, "/processing", map[string]string{"Connection": "close"})
		if !slices.Equal(a.statuses(), []int{102, 200}) {
			t.Fatalf("statuses %v, want 102 then 200", a.statuses())
		}
		interim, final := a.responses[0], a.responses[1]
		if got := interim.Header.Get("X-Served-By"); got != "mock processing" {
			t.Errorf("the 102 carries X-Served-By %q, want the mock's header", got)
		}
		if got := final.Header.Get("X-Served-By"); got != "mock processing" || a.bodies[1] != "done" {
			t.Errorf("the 200: X-Served-By %q, body %q; want the mock's header and body", got, a.bodies[1])
		}
		if final.Header.Get("X-Request-Id") == "" {
			t.Errorf("the 200 has no X-Request-Id")
		}
	})
	t.Run("mock 101", func(t *testing.T) {
		a := rawGet(t, addr, "/switching", nil)
		if !slices.Equal(a.statuses(), []int{101}) {
			t.Fatalf("statuses %v, want 101 alone", a.statuses())
		}
		if got := a.responses[0].Header.Get("X-Served-By"); got != "mock switching" {
			t.Errorf("the 101 carries X-Served-By %q, want the mock's header", got)
		}
		if !a.responses[0].Close {
			t.Errorf("the 101 does not say Connection: close")
		}
		if !a.closed {
			t.Errorf("the connection was left open after a 101 that switches to nothing: the client would wait for the new protocol")
		}
	})
	t.Run("loss 100", func(t *testing.T) {
		a := rawGet(t, addr, "/lost", map[string]string{"Connection": "close"})
		if !slices.Equal(a.statuses(), []int{100, 200}) {
			t.Fatalf("statuses %v, want 100 then 200", a.statuses())
		}
		if !strings.Contains(a.bodies[1], `"code":"LOSS_INJECTED"`) || a.responses[1].Header.Get("Content-Type") != "application/json" {
			t.Errorf("the 200 after the 100: %q (%s), want the LOSS_INJECTED envelope", a.bodies[1], a.responses[1].Header.Get("Content-Type"))
		}
	})
	t.Run("loss 101", func(t *testing.T) {
		a := rawGet(t, addr, "/lost-switching", nil)
		if !slices.Equal(a.statuses(), []int{101}) || a.bodies[0] != "" {
			t.Fatalf("statuses %v, body %q; want 101 alone, with no body", a.statuses(), a.bodies[0])
		}
		if !a.closed {
			t.Errorf("the connection was left open after a dropped request's 101")
		}
	})
	t.Run("admin API", func(t *testing.T) {
		body := `{"proxy": {"name": "hints", "type": "http", "url": "` + up.URL + `", "resolve": {"type": "header", "header": "X-Backend"},
			"loss": {"percentage": 1.0, "status": 103},
			"mocks": [{"name": "early", "request": {"method": "GET", "url": "^/early$"}, "response": {"status": 103}}]}}`
		req, _ := http.NewRequest("POST", "http://"+adminAddr+"/api/v1/proxies", strings.NewReader(body))
		req.Header.Set("X-Proxy-Authorization", "Bearer "+envToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("creating a proxy with 1xx statuses: %d %s", res.StatusCode, msg)
		}
		a := rawGet(t, addr, "/other", map[string]string{"Connection": "close", "X-Backend": "hints"})
		if !slices.Equal(a.statuses(), []int{103, 200}) || !strings.Contains(a.bodies[1], "LOSS_INJECTED") {
			t.Errorf("the created proxy's loss: statuses %v, body %q; want 103 then 200 with the envelope", a.statuses(), a.bodies[1])
		}
		a = rawGet(t, addr, "/early", map[string]string{"Connection": "close", "X-Backend": "hints"})
		if !slices.Equal(a.statuses(), []int{103, 200}) || a.bodies[1] != "" {
			t.Errorf("the created proxy's mock: statuses %v, body %q; want 103 then an empty 200", a.statuses(), a.bodies[1])
		}
	})

	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("want exit 0:\n%s", p)
	}
	if n := contacted.Load(); n != 0 {
		t.Errorf("the upstream was contacted %d times; every request here is Doppel's own answer", n)
	}
	// Startup says, at each path, what the client gets; the log lines
	// record the final status the client got.
	advised := map[string]string{}
	logged := map[string]string{}
	for _, obj := range p.jsonLines() {
		if path, _ := obj["path"].(string); obj["level"] == "WARN" {
			advised[path], _ = obj["message"].(string)
		}
		if mock, _ := obj["mock"].(string); isRequest(obj) && mock != "" {
			logged[mock] = fmt.Sprint(obj["status"])
		}
	}
	for path, want := range map[string]string{
		"proxies[0].mocks[0].response.status":   "the client gets a 102 interim response carrying the mock's headers, then 200 OK",
		"proxies[0].mocks[1].response.status":   "the client gets 101 Switching Protocols with the mock's headers and no body, then the connection is closed",
		"proxies[0].mocks[2].proxy.loss.status": "a dropped request gets a 100 interim response, then 200 OK with the LOSS_INJECTED envelope",
		"proxies[0].mocks[3].proxy.loss.status": "a dropped request gets 101 Switching Protocols with no body, then the connection is closed",
	} {
		if !strings.Contains(advised[path], want) {
			t.Errorf("advisory at %s: %q, want it to say %q\n%s", path, advised[path], want, p)
		}
	}
	for mock, want := range map[string]string{"processing": "200", "switching": "101", "lost": "200", "lost-switching": "101", "early": "200"} {
		if logged[mock] != want {
			t.Errorf("the log line for mock %s says status %s, want %s (what the client got)", mock, logged[mock], want)
		}
	}
}
