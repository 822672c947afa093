package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// relay is a TCP relay the test owns between the replicas and the
// database, which it can freeze: bytes stop flowing both ways, as when a
// network stalls, without stopping a server other tests share.
type relay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	r.thawed = sync.NewCond(&r.mu)
	t.Cleanup(func() { r.freeze(false); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *relay) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			r.mu.Lock()
			for r.frozen {
				r.thawed.Wait()
			}
			r.mu.Unlock()
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
}

func (r *relay) freeze(on bool) {
	r.mu.Lock()
	r.frozen = on
	r.mu.Unlock()
	r.thawed.Broadcast()
}

// via is url with its host the relay's.
func (r *relay) via(t *testing.T, url string) string {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = r.ln.Addr().String()
	return u.String()
}

// countedDoc is shop, whose orders mock fails the first two attempts of
// each Idempotency-Key with 503.
const countedDoc = `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - name: orders
        request: {method: POST, url: "^/orders$"}
        response: {status: 201, json: '{"created": true}'}
        proxy:
          loss:
            percentage: 1.0
            status: 503
            when: {count: {first: 2}, per: {header: Idempotency-Key}}
`

// TestAFleetCountsAsOne: three replicas behind a round-robin load
// balancer, a client that retries until it is answered 201: each key
// fails exactly twice, whichever replicas its attempts reach, each
// request's journal entry saying it was counted by the fleet. With the
// database stalled the requests keep flowing, each within the counters'
// timeout (DOPPEL_COUNTER_TIMEOUT, 2 s here) more,
// counted on the replica that served them (counter: local, the metric, one
// warning an outage), and once it answers again they count in the fleet
// (SPEC §18.1).
func TestAFleetCountsAsOne(t *testing.T) {
	t.Parallel()
	url, _ := publicFleet(t, countedDoc)
	u, _ := neturl.Parse(url)
	db := newRelay(t, u.Host)
	type replica struct {
		p            *proc
		proxy, admin string
	}
	var replicas []replica
	var targets []*neturl.URL
	// Counts wait 2 s for the database before they count locally: a
	// loaded machine's slow count is not an outage.
	slow := map[string]string{"DOPPEL_COUNTER_TIMEOUT": "2s"}
	for range 3 {
		p, admin, _, _ := fleetReplica(t, db.via(t, url), slow)
		proxy := "http://" + lineField(p.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing }), "proxy_addr")
		replicas = append(replicas, replica{p, proxy, admin})
		target, _ := neturl.Parse(proxy)
		targets = append(targets, target)
	}
	var next atomic.Uint64
	balancer := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[next.Add(1)%uint64(len(targets))])
	}})
	defer balancer.Close()

	// order sends one attempt: its status and how long it took.
	client := &http.Client{Timeout: 10 * time.Second}
	order := func(key string) (int, time.Duration) {
		t.Helper()
		req, _ := http.NewRequest("POST", balancer.URL+"/orders", strings.NewReader(`{"sku": 7}`))
		req.Header.Set("Idempotency-Key", key)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, time.Since(start)
	}
	// A retrying client: attempts until it is answered, at most five.
	for i := range 4 {
		key := fmt.Sprint("order-", i)
		var got []int
		for len(got) < 5 {
			status, _ := order(key)
			got = append(got, status)
			if status == 201 {
				break
			}
		}
		if fmt.Sprint(got) != "[503 503 201]" {
			t.Fatalf("%s through three replicas: %v, want [503 503 201]", key, got)
		}
	}
	counters := func(r replica) map[string]int {
		t.Helper()
		res := call(t, "GET", r.admin+"/api/v1/requests", "")
		var list struct {
			Requests []struct{ Counter string }
		}
		if err := json.Unmarshal(res.body, &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, e := range list.Requests {
			out[e.Counter]++
		}
		return out
	}
	for i, r := range replicas {
		if got := counters(r); got["fleet"] != 4 || len(got) != 1 {
			t.Fatalf("replica %d's journal: %v, want its 4 requests counted by the fleet", i, got)
		}
	}
	var listed struct {
		Counters []struct {
			Key   string
			Count int
		}
	}
	_ = json.Unmarshal(call(t, "GET", replicas[1].admin+"/api/v1/proxies/shop/counters", "").body, &listed)
	if len(listed.Counters) != 4 || listed.Counters[0].Count != 3 {
		t.Fatalf("the fleet's counters, from another replica: %+v", listed)
	}
	// A reset through one replica is the fleet's: the next key's attempts
	// fail again, whichever replica they reach.
	if r := call(t, "DELETE", replicas[2].admin+"/api/v1/proxies/shop/counters", ""); r.status != 204 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	_ = json.Unmarshal(call(t, "GET", replicas[0].admin+"/api/v1/proxies/shop/counters", "").body, &listed)
	if len(listed.Counters) != 0 {
		t.Fatalf("the fleet's counters after a reset through another replica: %+v", listed)
	}
	if a, _ := order("order-0"); a != 503 {
		t.Fatalf("order-0 after the reset: %d", a)
	}

	// The database stalls: nobody waits for it more than its 2 s.
	db.freeze(true)
	for i := range 6 {
		status, took := order("stalled")
		if status != 503 || took > 4*time.Second {
			t.Fatalf("attempt %d with the database stalled: %d after %v", i, status, took)
		}
	}
	for i, r := range replicas {
		if got := counters(r); got["local"] != 2 {
			t.Fatalf("replica %d's journal with the database stalled: %v, want 2 counted locally", i, got)
		}
		warned := 0
		for _, l := range r.p.stdoutLines() {
			if lineMsg(l) == "the fleet's counters did not answer in time; counting on this replica until they do" {
				warned++
			}
		}
		if warned != 1 {
			t.Fatalf("replica %d warned %d times of one outage\n%s", i, warned, r.p)
		}
		metrics := string(call(t, "GET", r.admin+"/metrics", "").body)
		if !strings.Contains(metrics, `doppel_counter_fallback_total{proxy="shop"} 2`) {
			t.Fatalf("replica %d's metric:\n%s", i, grepLines(metrics, "doppel_counter_fallback"))
		}
	}

	// Back: the next keys count in the fleet again.
	db.freeze(false)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		key := fmt.Sprint("after-", i)
		a, _ := order(key)
		b, _ := order(key)
		c, _ := order(key)
		if fmt.Sprint(a, b, c) == "503 503 201" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet did not count as one again after the database came back: %d %d %d", a, b, c)
		}
	}
	for _, r := range replicas {
		r.p.signal(syscall.SIGTERM)
		if code := r.p.waitExit(exitTimeout); code != wantOK {
			t.Fatal(errors.New(r.p.String()))
		}
	}
}

// grepLines is the lines of s that contain what.
func grepLines(s, what string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// seededDoc's mock fails half its requests, by the seed's rolls.
const seededDoc = `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - name: item
        request: {method: GET, url: "^/item$"}
        response: {status: 200, body: item}
        proxy:
          loss: {percentage: 0.5, status: 503}
`

// TestASeededFleetRollsLikeOneInstance: with --seed, the attempts of a
// request id are counted by the fleet, so retries of one id through three
// replicas meet the same rolls as through one Doppel (SPEC §15.1, §18.1).
func TestASeededFleetRollsLikeOneInstance(t *testing.T) {
	t.Parallel()
	const seed = "fleet-7"
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, seededDoc)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	attempts := func(base string) string {
		t.Helper()
		var got []string
		for range 10 {
			r := call(t, "GET", base+"/item", "", "X-Request-ID", "checkout-42")
			got = append(got, fmt.Sprint(r.status))
		}
		return strings.Join(got, " ")
	}
	alone, addr := serveUp(t, cfg, nil, "--seed", seed)
	want := attempts("http://" + addr)
	alone.signal(syscall.SIGTERM)
	alone.waitExit(exitTimeout)
	if !strings.Contains(want, "200") || !strings.Contains(want, "503") {
		t.Fatalf("the seed's rolls do not tell a fleet from replicas on their own: %s", want)
	}

	url := pgtest.URL(t)
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	var targets []*neturl.URL
	for range 3 {
		p, _, _, _ := fleetReplica(t, url, map[string]string{"DOPPEL_COUNTER_TIMEOUT": "10s"}, "--seed", seed)
		target, _ := neturl.Parse("http://" + lineField(p.waitLine("the startup line", startTimeout, func(l string) bool { return lineMsg(l) == msgServing }), "proxy_addr"))
		targets = append(targets, target)
	}
	var next atomic.Uint64
	balancer := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[next.Add(1)%uint64(len(targets))])
	}})
	defer balancer.Close()
	if got := attempts(balancer.URL); got != want {
		t.Fatalf("ten attempts of one id through three replicas: %s\nthrough one Doppel: %s", got, want)
	}
}
