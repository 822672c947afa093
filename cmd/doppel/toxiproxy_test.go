package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// The Toxiproxy-compatible API through the binary (SPEC §17.8), driven by
// Toxiproxy's own Go client, in front of a real TCP echo server.

// toxiproxyDoppel serves Doppel with toxiproxy on a free port, and returns
// Toxiproxy's client for it.
func toxiproxyDoppel(t *testing.T) (*proc, *toxiproxy.Client, string) {
	t.Helper()
	p, cl, api, _ := toxiproxyDoppelWith(t, "127.0.0.1", "", "")
	return p, cl, api
}

// toxiproxyDoppelWith serves the toxiproxy API on host, with more keys in
// its section and more of the document before it; it returns the API's
// loopback address and the proxy listener's.
func toxiproxyDoppelWith(t *testing.T, host, section, doc string) (*proc, *toxiproxy.Client, string, string) {
	t.Helper()
	dir := t.TempDir()
	// One call, three distinct ports: the document's server and admin
	// ports may not be toxiproxy's (V49).
	ports := freePorts(t, 3)
	api := fmt.Sprintf("127.0.0.1:%d", ports[2])
	cfg := serveConfig(t, dir, ports[0], ports[1], doc+fmt.Sprintf("toxiproxy: {host: %s, port: %d%s}\n", host, ports[2], section))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, proxyAddr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	port := fmt.Sprintf(":%d", ports[2])
	p.waitLine("the Toxiproxy API's line", 5*time.Second, func(l string) bool {
		return strings.Contains(l, "Toxiproxy-compatible API is listening") && strings.HasSuffix(lineField(l, "toxiproxy_addr"), port)
	})
	return p, toxiproxy.NewClient(api), api, proxyAddr
}

// echoTime is how long one echo of a few bytes takes on c.
func echoTime(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	began := time.Now()
	echoBack(t, c, []byte("ping"))
	return time.Since(began)
}

func TestToxiproxyClientLatencyOnAnOpenConnection(t *testing.T) {
	t.Parallel()
	p, cl, _ := toxiproxyDoppel(t)
	up := tcpEcho(t)
	px, err := cl.CreateProxy("db", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	all, err := cl.Proxies()
	if err != nil || all["db"] == nil || all["db"].Upstream != up || all["db"].Listen != px.Listen || !all["db"].Enabled {
		t.Fatalf("the list: %v %+v", err, all["db"])
	}
	c := tcpDial(t, px.Listen)
	if d := echoTime(t, c); d > 150*time.Millisecond {
		t.Fatalf("without a toxic an echo took %v", d)
	}
	// The connection is open before the toxic: it applies all the same.
	if _, err := px.AddToxic("slow", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 300}); err != nil {
		t.Fatal(err)
	}
	if d := echoTime(t, c); d < 300*time.Millisecond || d > 900*time.Millisecond {
		t.Errorf("with latency 300ms an echo took %v", d)
	}
	if _, err := px.UpdateToxic("slow", -1, toxiproxy.Attributes{"latency": 600}); err != nil {
		t.Fatal(err)
	}
	if d := echoTime(t, c); d < 600*time.Millisecond || d > 1200*time.Millisecond {
		t.Errorf("updated to 600ms an echo took %v", d)
	}
	toxics, err := px.Toxics()
	if err != nil || len(toxics) != 1 || toxics[0].Name != "slow" || toxics[0].Attributes["latency"] != float64(600) {
		t.Errorf("the toxics: %v %+v", err, toxics)
	}
	if err := px.RemoveToxic("slow"); err != nil {
		t.Fatal(err)
	}
	if d := echoTime(t, c); d > 150*time.Millisecond {
		t.Errorf("with the toxic removed an echo took %v", d)
	}
	// The connection is logged when it ends, with the toxic that applied.
	c.Close()
	p.waitLine("the connection's line", 5*time.Second, func(l string) bool {
		return strings.Contains(l, `"message":"connection"`) && strings.Contains(l, `"proxy":"db"`) &&
			strings.Contains(l, `"toxics":"latency"`) && strings.Contains(l, `"source":"toxiproxy"`)
	})
	// And counted as a tcp proxy's connection is.
	m := string(mustGet(t, newClient(), "http://"+adminAddrOf(t, p)+"/metrics", nil).body)
	if !strings.Contains(m, `doppel_tcp_connections_total{fault="",proxy="db"} 1`) || !strings.Contains(m, `doppel_faults_total{fault="latency",proxy="db"} 1`) {
		t.Errorf("the metrics have no connection of db:\n%.2000s", m)
	}
	// And journaled, with the latency the toxic injected: 300 ms, then
	// 600 ms, and none once it was removed.
	var list struct {
		Requests []struct {
			Method string `json:"method"`
			Status *int   `json:"status"`
			Fault  struct {
				LatencyMS float64 `json:"latency_ms"`
			} `json:"fault"`
		} `json:"requests"`
	}
	r := mustGet(t, newClient(), "http://"+adminAddrOf(t, p)+"/api/v1/requests?proxy=db", nil)
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Requests) != 1 {
		t.Fatalf("the journal: %v %s", err, r.body)
	}
	if e := list.Requests[0]; e.Method != "TCP" || e.Status != nil || e.Fault.LatencyMS < 900 || e.Fault.LatencyMS > 1500 {
		t.Errorf("the entry: %s", r.body)
	}
}

func TestToxiproxyClientResetPeerAndLimitData(t *testing.T) {
	t.Parallel()
	_, cl, _ := toxiproxyDoppel(t)
	up := tcpEcho(t)
	t.Run("reset_peer", func(t *testing.T) {
		px, err := cl.CreateProxy("reset", "127.0.0.1:0", up)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := px.AddToxic("", "reset_peer", "", 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
		c := tcpDial(t, px.Listen)
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) || len(got) != 0 {
			t.Errorf("read %q, %v; want ECONNRESET", got, err)
		}
	})
	t.Run("limit_data", func(t *testing.T) {
		px, err := cl.CreateProxy("limit", "127.0.0.1:0", up)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := px.AddToxic("", "limit_data", "downstream", 1, toxiproxy.Attributes{"bytes": 10}); err != nil {
			t.Fatal(err)
		}
		c := tcpDial(t, px.Listen)
		if _, err := c.Write(bytes.Repeat([]byte("x"), 100)); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		if err != nil || len(got) != 10 {
			t.Errorf("read %d bytes, %v; want 10 and the end", len(got), err)
		}
	})
}

// Toxiproxy's noop: a toxic its client adds, lists and removes, that
// lets every byte pass.
func TestToxiproxyClientNoop(t *testing.T) {
	t.Parallel()
	_, cl, _ := toxiproxyDoppel(t)
	px, err := cl.CreateProxy("db", "127.0.0.1:0", tcpEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c := tcpDial(t, px.Listen)
	added, err := px.AddToxic("", "noop", "", 1, nil)
	if err != nil || added.Name != "noop_downstream" || added.Stream != "downstream" {
		t.Fatalf("AddToxic noop: %v %+v", err, added)
	}
	echoBack(t, c, []byte("through a noop"))
	echoBack(t, tcpDial(t, px.Listen), []byte("a new connection"))
	if toxics, err := px.Toxics(); err != nil || len(toxics) != 1 || toxics[0].Type != "noop" {
		t.Fatalf("the toxics: %v %+v", err, toxics)
	}
	if err := px.RemoveToxic("noop_downstream"); err != nil {
		t.Fatal(err)
	}
	if toxics, err := px.Toxics(); err != nil || len(toxics) != 0 {
		t.Fatalf("after RemoveToxic: %v %+v", err, toxics)
	}
	echoBack(t, c, []byte("after"))
}

func TestToxiproxyClientDisableResetStatePopulateAndErrors(t *testing.T) {
	t.Parallel()
	_, cl, api := toxiproxyDoppel(t)
	up := tcpEcho(t)
	px, err := cl.CreateProxy("db", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	// Disabled, it stops listening and its connections end.
	c := tcpDial(t, px.Listen)
	echoBack(t, c, []byte("ping"))
	if err := px.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("an open connection of a disabled proxy: %v", err)
	}
	if d, err := net.Dial("tcp", px.Listen); err == nil {
		d.Close()
		t.Error("a disabled proxy still listens")
	}
	if _, err := px.AddToxic("", "timeout", "upstream", 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	// ResetState enables every proxy and removes every toxic.
	if err := cl.ResetState(); err != nil {
		t.Fatal(err)
	}
	px, err = cl.Proxy("db")
	if err != nil || !px.Enabled || len(px.ActiveToxics) != 0 {
		t.Fatalf("after ResetState: %v %+v", err, px)
	}
	echoBack(t, tcpDial(t, px.Listen), []byte("back"))

	_, err = px.AddToxic("", "earthquake", "", 1, nil)
	if err == nil || !strings.Contains(err.Error(), "HTTP 400: invalid toxic type") {
		t.Errorf("an unknown toxic type: %v", err)
	}
	_, err = cl.CreateProxy("db", "127.0.0.1:0", up)
	if err == nil || !strings.Contains(err.Error(), "HTTP 409: proxy already exists") {
		t.Errorf("a second db: %v", err)
	}
	if _, err := cl.Proxy("nope"); err == nil || !strings.Contains(err.Error(), "HTTP 404: proxy not found") {
		t.Errorf("a missing proxy: %v", err)
	}

	made, err := cl.Populate([]toxiproxy.Proxy{
		{Name: "zeta", Listen: "127.0.0.1:0", Upstream: up, Enabled: true},
		{Name: "alpha", Listen: "127.0.0.1:0", Upstream: up, Enabled: true},
	})
	if err != nil || len(made) != 2 || made[0].Name != "zeta" || made[1].Name != "alpha" {
		t.Fatalf("Populate: %v %+v", err, made)
	}
	for _, m := range made {
		echoBack(t, tcpDial(t, m.Listen), []byte(m.Name))
	}
	if all, err := cl.Proxies(); err != nil || len(all) != 3 {
		t.Errorf("after Populate: %v %d proxies", err, len(all))
	}

	r, err := http.Get("http://" + api + "/version")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if want := `{"version": "2.12.0"}` + "\n"; r.StatusCode != 200 || string(v) != want || r.Header.Get("Content-Type") != "application/json;charset=utf-8" {
		t.Errorf("version: %d %q (%s), want Toxiproxy 2.12.0's %q", r.StatusCode, v, r.Header.Get("Content-Type"), want)
	}
	// Toxiproxy serves no /metrics unless asked for.
	if r, err := http.Get("http://" + api + "/metrics"); err != nil || r.StatusCode != 404 {
		t.Errorf("GET /metrics unasked: %v %v, want 404", err, r)
	} else {
		r.Body.Close()
	}
	// Every answer carries a request id, as Toxiproxy's do.
	if id := r.Header.Get("X-Toxiproxy-Request-Id"); len(id) != 20 || strings.Trim(id, "0123456789abcdefghijklmnopqrstuv") != "" {
		t.Errorf("X-Toxiproxy-Request-Id %q, want an xid", id)
	}
}

// Populate again with the same listen, by name, and upstream: the proxy
// is left as it is, its toxic and its open connection kept.
func TestToxiproxyClientPopulateKeepsTheSame(t *testing.T) {
	t.Parallel()
	_, cl, _ := toxiproxyDoppel(t)
	up := tcpEcho(t)
	listen := fmt.Sprintf("localhost:%d", freePorts(t, 1)[0])
	list := []toxiproxy.Proxy{{Name: "db", Listen: listen, Upstream: up, Enabled: true}}
	made, err := cl.Populate(list)
	if err != nil || len(made) != 1 {
		t.Fatalf("Populate: %v %+v", err, made)
	}
	if _, err := made[0].AddToxic("kept", "latency", "", 1, toxiproxy.Attributes{"latency": 1}); err != nil {
		t.Fatal(err)
	}
	c := tcpDial(t, made[0].Listen)
	echoBack(t, c, []byte("before"))
	again, err := cl.Populate(list)
	if err != nil || len(again) != 1 || again[0].Listen != made[0].Listen || len(again[0].ActiveToxics) != 1 || again[0].ActiveToxics[0].Name != "kept" {
		t.Fatalf("Populate again: %v %+v, want db as it was, with its toxic", err, again)
	}
	echoBack(t, c, []byte("the same connection"))
}

// With proxy_metrics and runtime_metrics, the API's /metrics serves
// Toxiproxy's series: a proxy's bytes each way once its connection ends,
// and the runtime's.
func TestToxiproxyMetrics(t *testing.T) {
	t.Parallel()
	p, cl, api, _ := toxiproxyDoppelWith(t, "127.0.0.1", ", proxy_metrics: true, runtime_metrics: true", "")
	up := tcpEcho(t)
	px, err := cl.CreateProxy("db", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	c := tcpDial(t, px.Listen)
	echoBack(t, c, []byte("ping"))
	c.Close()
	want := []string{"# TYPE toxiproxy_proxy_received_bytes_total counter", "# TYPE toxiproxy_proxy_sent_bytes_total counter"}
	for _, name := range []string{"received", "sent"} {
		for _, dir := range []string{"upstream", "downstream"} {
			want = append(want, fmt.Sprintf(`toxiproxy_proxy_%s_bytes_total{direction=%q,listener=%q,proxy="db",upstream=%q} 4`, name, dir, px.Listen, up))
		}
	}
	want = append(want, "# TYPE go_goroutines gauge", "# TYPE process_cpu_seconds_total counter", "# TYPE go_build_info gauge")
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := http.Get("http://" + api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
		missing := 0
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics (%d) lacks some of\n%s\nin\n%.3000s", r.StatusCode, strings.Join(want, "\n"), body)
		}
	}
	// Its connection is still logged as any.
	p.waitLine("the connection's line", 5*time.Second, func(l string) bool {
		return strings.Contains(l, `"message":"connection"`) && strings.Contains(l, `"proxy":"db"`) && strings.Contains(l, `"source":"toxiproxy"`)
	})
}

// A listen address in use is Toxiproxy's answer, net.Listen's words and
// 500, on create and in a populate, which returns what it made before.
func TestToxiproxyClientListenInUse(t *testing.T) {
	t.Parallel()
	_, cl, _ := toxiproxyDoppel(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	inUse := "HTTP 500: listen tcp " + taken.Addr().String() + ": bind: address already in use"
	_, port, _ := net.SplitHostPort(taken.Addr().String())
	if _, err := cl.CreateProxy("db", "localhost:"+port, "127.0.0.1:9"); err == nil || err.Error() != "Create: "+inUse {
		t.Errorf("CreateProxy on a port in use: %v, want Create: %s", err, inUse)
	}
	made, err := cl.Populate([]toxiproxy.Proxy{
		{Name: "first", Listen: "127.0.0.1:0", Upstream: "127.0.0.1:9", Enabled: true},
		{Name: "second", Listen: taken.Addr().String(), Upstream: "127.0.0.1:9", Enabled: true},
	})
	if err == nil || err.Error() != "Populate: "+inUse || len(made) != 1 || made[0].Name != "first" {
		t.Errorf("Populate with a port in use: %v %+v, want first and Populate: %s", err, made, inUse)
	}
}

func TestToxiproxyPortInUseStopsTheStart(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, port, _ := net.SplitHostPort(taken.Addr().String())
	cfg := serveConfig(t, t.TempDir(), 0, 0, "toxiproxy: {host: 127.0.0.1, port: "+port+"}\n")
	r := doppel(t, invocation{args: []string{"serve", "--config", cfg}})
	if out := r.stdout + r.stderr; r.code != 1 || !strings.Contains(out, "Toxiproxy API cannot bind "+taken.Addr().String()) {
		t.Errorf("exit %d:\n%s", r.code, out)
	}
}
