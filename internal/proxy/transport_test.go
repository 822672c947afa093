package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/fault"
)

// cutOutcome is how a request under transport faults ended for the client.
func cutOutcome(t *testing.T, url, id string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Request-ID", id)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case err != nil && strings.Contains(err.Error(), "EOF"):
		return "closed" // the hang's FIN
	case err != nil:
		t.Fatalf("%s: %v", id, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "cut body"
	}
	return fmt.Sprintf("%d %d", res.StatusCode, len(b))
}

// TestSeededTransportFaultsReplay: under a seed, which requests are
// aborted, hung or cut is a function of their ids, whatever the order.
func TestSeededTransportFaultsReplay(t *testing.T) {
	up, _ := upstreamCounting(t)
	doc := oneProxy(up.URL, "abort: {percentage: 0.3, at: request}\nhang: {percentage: 0.3, seconds: 0}\nloss: {percentage: 0.2, status: 503}")
	run := func(seed string, ids []string) map[string]string {
		var roller fault.Roller
		if seed != "" {
			roller = fault.NewSeeded(seed)
		}
		d := start(t, doc, roller)
		out := map[string]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				o := cutOutcome(t, d.URL+"/x", id)
				mu.Lock()
				out[id] = o
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
	ids := make([]string, 200)
	reversed := make([]string, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("t-%03d", i)
		reversed[len(ids)-1-i] = ids[i]
	}
	first, second, other := run("s-1", ids), run("s-1", reversed), run("s-2", ids)
	kinds, differ := map[string]int{}, 0
	for _, id := range ids {
		kinds[first[id]]++
		if first[id] != second[id] {
			t.Errorf("%s: %s, then %s", id, first[id], second[id])
		}
		if first[id] != other[id] {
			differ++
		}
	}
	if kinds["reset"] < 30 || kinds["closed"] < 20 || kinds["503 99"] < 5 {
		t.Errorf("outcomes do not look like the configuration: %v", kinds)
	}
	if differ < 40 {
		t.Errorf("another seed changed only %d of %d outcomes", differ, len(ids))
	}
}

// TestAnAbortResetsAnHTTP2Stream: on HTTP/2 the stream is reset and the
// connection kept for the next request.
func TestAnAbortResetsAnHTTP2Stream(t *testing.T) {
	up, _ := upstreamCounting(t)
	d := start(t, mocks(up.URL, "", `
- name: cut
  request: {method: GET, url: "^/cut$"}
  response: {status: 200, body: "0123456789"}
  proxy: {abort: {percentage: 1, at: body, after: 4}}
- name: whole
  request: {method: GET, url: "^/whole$"}
  response: {status: 200, body: "whole"}
- name: short
  request: {method: GET, url: "^/short$"}
  response: {status: 200, body: "0123456789"}
  proxy: {abort: {percentage: 1, at: body, after: 100}}
`), nil)
	d.Close()
	d.Server = newTLS(t, d.Config.Handler)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	res, err := c.Get(d.URL + "/cut")
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtoMajor != 2 {
		t.Fatalf("served over %s", res.Proto)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "0123" || err == nil || !strings.Contains(err.Error(), "INTERNAL_ERROR") {
		t.Errorf("read %q, then %v; want 4 bytes and a stream reset with INTERNAL_ERROR", b, err)
	}
	var reused bool
	trace := &http.Client{Transport: c.Transport}
	req, _ := http.NewRequest("GET", d.URL+"/whole", nil)
	res, err = trace.Do(req.WithContext(withGotConn(req.Context(), &reused)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "whole" || !reused {
		t.Errorf("the next request: %q, connection reused %v", b, reused)
	}
	// A body shorter than after is cut once it is all written, after the
	// handler's last write: the request is still recorded.
	if res, err := c.Get(d.URL + "/short"); err == nil {
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil {
			t.Error("a body shorter than after was not cut")
		}
	}
	lines := d.logs.lines(t, 3)
	paths := map[any]any{}
	for _, l := range lines {
		paths[l["path"]] = l["fault"]
	}
	if paths["/cut"] != "abort" || paths["/short"] != "abort" {
		t.Errorf("request lines: %v", lines)
	}
}

func newTLS(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func withGotConn(ctx context.Context, reused *bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { *reused = i.Reused }})
}

// TestADelayedAnswerHoldsNoUpstreamConnection: a small upstream body is
// read before an injected latency is waited out, so the upstream
// connection serves the next request meanwhile: twenty delayed requests
// that arrive 10 ms apart need one or two upstream connections, not
// twenty.
func TestADelayedAnswerHoldsNoUpstreamConnection(t *testing.T) {
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = w.Write([]byte("small"))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	d := start(t, oneProxy(up.URL, "latency: {percentage: 1, min: 0.5, max: 0.5}"), nil)
	var wg sync.WaitGroup
	for i := range 20 {
		time.Sleep(10 * time.Millisecond)
		wg.Go(func() {
			res, body := get(t, d.URL+fmt.Sprintf("/x%d", i), nil)
			if res.StatusCode != 200 || string(body) != "small" {
				t.Errorf("%d %q", res.StatusCode, body)
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n > 5 {
		t.Errorf("%d upstream connections for 20 delayed requests", n)
	}
}
