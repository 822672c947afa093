package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TCP proxies through the binary (SPEC §17.8): a real TCP echo server
// behind, raw sockets in front.

func tcpEcho(t *testing.T) string {
	return tcpServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// tcpServer serves each connection with handle (closing it after) on a
// free loopback port until the test ends.
func tcpServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// tcpDoppel serves one tcp proxy, db, on a free port, relaying to up with
// the extra YAML; the admin API is public.
func tcpDoppel(t *testing.T, up, extra string) (p *proc, listen, admin string) {
	t.Helper()
	dir := t.TempDir()
	listen = fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	cfg := serveConfig(t, dir, 0, 0, fmt.Sprintf("proxies:\n  - name: db\n    type: tcp\n    listen: %s\n    upstream: %s\n%s", listen, up, extra))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, _ = serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	return p, listen, adminAddrOf(t, p)
}

func tcpDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// dialReset connects to addr, sends send and reads to the end: the error
// says how the connection ended (a reset may come before the dial has
// returned).
func dialReset(addr string, send []byte) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if send != nil {
		// A reset that came before the write is said once, to the write:
		// the read after it sees only the end.
		if _, err := c.Write(send); errors.Is(err, syscall.ECONNRESET) {
			return err
		}
	}
	_, err = io.ReadAll(c)
	return err
}

func echoBack(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("echo: %v", err)
	}
}

// connectionLine waits for the log line of a connection of db.
func connectionLine(t *testing.T, p *proc) map[string]any {
	t.Helper()
	var line map[string]any
	p.waitLine("a connection line", 10*time.Second, func(l string) bool {
		if m, err := decodeLine(l); err == nil && m["message"] == "connection" && m["proxy"] == "db" {
			line = m
			return true
		}
		return false
	})
	return line
}

func TestATCPProxyRelaysAndJournalsEachConnection(t *testing.T) {
	t.Parallel()
	p, listen, admin := tcpDoppel(t, tcpEcho(t), "")
	c := tcpDial(t, listen)
	big := bytes.Repeat([]byte("0123456789"), 20000)
	echoBack(t, c, big)
	c.Close()
	line := connectionLine(t, p)
	if number(line["bytes_up"]) != float64(len(big)) || number(line["bytes_down"]) != float64(len(big)) || line["fault"] != "" {
		t.Errorf("the line: %v", line)
	}
	r := mustGet(t, newClient(), "http://"+admin+"/api/v1/requests?proxy=db", nil)
	var list struct {
		Requests []struct {
			Method string `json:"method"`
			Tunnel struct {
				BytesUp   float64 `json:"bytes_up"`
				BytesDown float64 `json:"bytes_down"`
			} `json:"tunnel"`
			Client    string `json:"client"`
			RequestID string `json:"id"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Requests) != 1 || list.Requests[0].Method != "TCP" || list.Requests[0].Client != "127.0.0.1" ||
		!mintedID.MatchString(list.Requests[0].RequestID) ||
		list.Requests[0].Tunnel.BytesUp != float64(len(big)) || list.Requests[0].Tunnel.BytesDown != float64(len(big)) {
		t.Errorf("the journal: %v %s", err, r.body)
	}
	metrics := string(mustGet(t, newClient(), "http://"+admin+"/metrics", nil).body)
	for _, want := range []string{
		`doppel_tcp_connections_total{fault="",proxy="db"} 1`,
		fmt.Sprintf(`doppel_tcp_bytes_total{direction="up",proxy="db"} %d`, len(big)),
		fmt.Sprintf(`doppel_tcp_bytes_total{direction="down",proxy="db"} %d`, len(big)),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the metrics have no %s", want)
		}
	}
	st := mustGet(t, newClient(), "http://"+admin+"/api/v1/status", nil)
	if !strings.Contains(string(st.body), `"resolve":"listen:`+listen+`"`) {
		t.Errorf("the status: %s", st.body)
	}
}

func TestTCPFaults(t *testing.T) {
	t.Parallel()
	up := tcpEcho(t)
	t.Run("latency delays every chunk from its arrival", func(t *testing.T) {
		t.Parallel()
		_, listen, _ := tcpDoppel(t, up, "    latency: {percentage: 1, min: 0.2, max: 0.2}\n")
		c := tcpDial(t, listen)
		for _, b := range []string{"ping", "again"} {
			began := time.Now()
			echoBack(t, c, []byte(b))
			if d := time.Since(began); d < 200*time.Millisecond {
				t.Errorf("%s came back after %v: every exchange is delayed", b, d)
			}
		}
		// A stream is delayed, not throttled: 1 MiB, 32 reads of the
		// relay, comes back in about 200 ms and its transfer, not 200 ms
		// a chunk (6.4 s).
		big := bytes.Repeat([]byte("m"), 1<<20)
		began := time.Now()
		go func() { _, _ = c.Write(big) }()
		got := make([]byte, len(big))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d < 200*time.Millisecond || d > 2*time.Second {
			t.Errorf("1 MiB through 200 ms of latency took %v", d)
		}
	})
	t.Run("abort at request resets before relaying", func(t *testing.T) {
		t.Parallel()
		p, listen, _ := tcpDoppel(t, up, "    abort: {percentage: 1, at: request}\n")
		if err := dialReset(listen, []byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("got %v, want a reset", err)
		}
		if line := connectionLine(t, p); line["fault"] != "abort" || number(line["bytes_up"]) != 0 {
			t.Errorf("the line: %v", line)
		}
	})
	t.Run("abort at body cuts after its bytes", func(t *testing.T) {
		t.Parallel()
		_, listen, _ := tcpDoppel(t, up, "    abort: {percentage: 1, at: body, after: 1000, how: close}\n")
		c := tcpDial(t, listen)
		echoBack(t, c, bytes.Repeat([]byte("b"), 600)) // under 1,000 each way: relayed
		_, _ = c.Write(bytes.Repeat([]byte("b"), 600)) // 1,200 toward the upstream: cut at 1,000
		got, err := io.ReadAll(c)
		if len(got) > 400 || err != nil {
			t.Errorf("%d bytes after the first 600, then %v: want at most the 400 that passed, then a FIN", len(got), err)
		}
	})
	t.Run("hang holds then closes", func(t *testing.T) {
		t.Parallel()
		_, listen, _ := tcpDoppel(t, up, "    hang: {percentage: 1, seconds: 0.4}\n")
		c := tcpDial(t, listen)
		_, _ = c.Write([]byte("hello"))
		began := time.Now()
		got, err := io.ReadAll(c)
		if len(got) != 0 || err != nil || time.Since(began) < 350*time.Millisecond {
			t.Errorf("%q %v after %v", got, err, time.Since(began))
		}
	})
	t.Run("bandwidth paces", func(t *testing.T) {
		t.Parallel()
		_, listen, _ := tcpDoppel(t, up, "    bandwidth: {percentage: 1, bytes_per_second: 100Ki}\n")
		c := tcpDial(t, listen)
		began := time.Now()
		echoBack(t, c, bytes.Repeat([]byte("w"), 40<<10))
		if d := time.Since(began); d < 300*time.Millisecond {
			t.Errorf("40 KiB each way at 100 KiB/s took %v", d)
		}
	})
	t.Run("when.count fails only the first connection", func(t *testing.T) {
		t.Parallel()
		_, listen, admin := tcpDoppel(t, up, "    abort: {percentage: 1, at: request, when: {count: {first: 1}}}\n")
		if err := dialReset(listen, nil); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the first: %v, want a reset", err)
		}
		echoBack(t, tcpDial(t, listen), []byte("second"))
		// The count is the API's, and a reset starts it again.
		r := mustGet(t, newClient(), "http://"+admin+"/api/v1/proxies/db/counters", nil)
		if !strings.Contains(string(r.body), `"fault":"abort"`) || !strings.Contains(string(r.body), `"count":2`) {
			t.Errorf("the counters: %s", r.body)
		}
		req, _ := http.NewRequest("DELETE", "http://"+admin+"/api/v1/proxies/db/counters", nil)
		if res, err := newClient().Do(req); err != nil || res.StatusCode != 204 {
			t.Fatalf("reset: %v %v", res, err)
		}
		if err := dialReset(listen, nil); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("after the reset, the first connection again: %v, want a reset", err)
		}
	})
}

func TestTCPProxiesFollowTheAPI(t *testing.T) {
	t.Parallel()
	up := tcpEcho(t)
	_, listen, admin := tcpDoppel(t, up, "")
	// A second tcp proxy created through the API listens when the write
	// answers; deleted, it stops.
	second := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	body := fmt.Sprintf(`{"proxy": {"name": "cache", "type": "tcp", "listen": %q, "upstream": %q}}`, second, up)
	res, err := newClient().Post("http://"+admin+"/api/v1/proxies", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("create: %d %s", res.StatusCode, b)
	}
	echoBack(t, tcpDial(t, second), []byte("through the new one"))
	req, _ := http.NewRequest("DELETE", "http://"+admin+"/api/v1/proxies/cache", nil)
	if res, err := newClient().Do(req); err != nil || res.StatusCode != 204 {
		t.Fatalf("delete: %v %v", res, err)
	}
	if c, err := net.DialTimeout("tcp", second, time.Second); err == nil {
		c.Close()
		t.Error("the deleted proxy still listens")
	}
	echoBack(t, tcpDial(t, listen), []byte("the first is untouched"))

	// An address another process holds is refused, and nothing stored.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	body = fmt.Sprintf(`{"proxy": {"name": "cache", "type": "tcp", "listen": %q, "upstream": %q}}`, taken.Addr(), up)
	res, err = newClient().Post("http://"+admin+"/api/v1/proxies", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "CONFIG_INVALID") || !strings.Contains(string(b), "listen: cannot be listened on") {
		t.Errorf("a listen in use: %d %s", res.StatusCode, b)
	}
	if r := mustGet(t, newClient(), "http://"+admin+"/api/v1/proxies/cache", nil); r.status != 404 {
		t.Errorf("the refused proxy was stored: %d %s", r.status, r.body)
	}
}

func TestTCPBadInput(t *testing.T) {
	t.Parallel()
	t.Run("a listen address in use", func(t *testing.T) {
		t.Parallel()
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		dir := t.TempDir()
		cfg := serveConfig(t, dir, 0, 0, fmt.Sprintf("proxies:\n  - name: db\n    type: tcp\n    listen: %s\n    upstream: 127.0.0.1:9\n", taken.Addr()))
		r := doppel(t, invocation{args: []string{"serve", "--config", cfg}})
		if out := r.stdout + r.stderr; r.code != 1 || !strings.Contains(out, "db") || !strings.Contains(out, taken.Addr().String()) || !strings.Contains(out, "in use") {
			t.Errorf("exit %d:\n%s", r.code, out)
		}
	})
	t.Run("an unreachable upstream", func(t *testing.T) {
		t.Parallel()
		gone, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := gone.Addr().String()
		gone.Close()
		p, listen, _ := tcpDoppel(t, addr, "")
		if err := dialReset(listen, nil); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the client: %v, want a reset", err)
		}
		if line := connectionLine(t, p); !strings.Contains(fmt.Sprint(line["error"]), "cannot be reached") {
			t.Errorf("the line: %v", line)
		}
	})
}

// TestATakenTCPAddressRefusesTheReload: a reload whose document names a tcp
// listen address another process holds is refused like an invalid
// document: nothing of it is in force, and the answer names the address.
func TestATakenTCPAddressRefusesTheReload(t *testing.T) {
	t.Parallel()
	up := tcpEcho(t)
	dir := t.TempDir()
	listen := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	db := fmt.Sprintf("proxies:\n  - name: db\n    type: tcp\n    listen: %s\n    upstream: %s\n", listen, up)
	cfg := serveConfig(t, dir, 0, 0, db)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, _ := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := adminAddrOf(t, p)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	more := fmt.Sprintf("  - name: cache\n    type: tcp\n    listen: %s\n    upstream: %s\n  - name: web\n    type: http\n    url: http://127.0.0.1:9\n", taken.Addr(), up)
	if err := os.WriteFile(cfg, []byte(readFile(t, cfg)+more), 0o644); err != nil {
		t.Fatal(err)
	}
	r := doppel(t, invocation{args: []string{"config", "reload", "--config", cfg}})
	if out := r.stdout + r.stderr; r.code != 1 || !strings.Contains(out, "reload rejected: CONFIG_INVALID") ||
		!strings.Contains(out, "proxies[1].listen: "+taken.Addr().String()+" cannot be listened on") || !strings.Contains(out, "in use") {
		t.Errorf("reload: exit %d\n%s", r.code, out)
	}
	if l := mustGet(t, newClient(), "http://"+admin+"/api/v1/proxies", nil); strings.Contains(string(l.body), `"web"`) || strings.Contains(string(l.body), `"cache"`) {
		t.Errorf("the refused reload is in force: %s", l.body)
	}
	echoBack(t, tcpDial(t, listen), []byte("db still relays"))
}

// jsonLine is a JSON log line as decodeLine reads it, its numbers as
// json.Number; nil for another line.
func jsonLine(l string) map[string]any {
	m, err := decodeLine(l)
	if err != nil {
		return nil
	}
	return m
}

// TestATCPConnectionIsJournaledAsItWas: a tcp connection's entry has the
// latency injected on it (as the log line has), and no HTTP status, which
// requests list shows as such; every count of proxies a user sees counts
// tcp proxies too: the startup line, config reload, the admin API's
// reload and the line of a reload after an edit.
func TestATCPConnectionIsJournaledAsItWas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	tcpProxy := func(name string, port int) string {
		return fmt.Sprintf("  - name: %s\n    type: tcp\n    listen: 127.0.0.1:%d\n    upstream: %s\n    latency: {percentage: 1, min: 0.3, max: 0.3}\n", name, port, tcpEcho(t))
	}
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("web", "http://127.0.0.1:9/", "")+tcpProxy("db", ports[0]))
	src := strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1)
	cfg = writeFile(t, dir, "main.yaml", src)
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--watch", "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	p.waitServing()
	admin := adminAddrOf(t, p)
	counted := func(what string, line map[string]any, all, tcp float64) {
		t.Helper()
		if number(line["proxies"]) != all || number(line["tcp_proxies"]) != tcp {
			t.Errorf("%s counts %v proxies, %v tcp; want %v, %v: %v", what, line["proxies"], line["tcp_proxies"], all, tcp, line)
		}
	}
	counted("the startup line", jsonLine(p.waitLine("the startup line", 5*time.Second, func(l string) bool { return lineMsg(l) == msgServing })), 2, 1)

	c := tcpDial(t, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	echoBack(t, c, []byte("ping"))
	c.Close()
	if line := connectionLine(t, p); number(line["latency_injected_ms"]) < 300 || number(line["latency_injected_ms"]) > number(line["duration_ms"]) {
		t.Errorf("the line: %v", line)
	}
	r := mustGet(t, newClient(), "http://"+admin+"/api/v1/requests?proxy=db", nil)
	var list struct {
		Requests []map[string]any `json:"requests"`
	}
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.UseNumber()
	if err := d.Decode(&list); err != nil || len(list.Requests) != 1 {
		t.Fatalf("the journal: %v %s", err, r.body)
	}
	e := list.Requests[0]
	status, hasStatus := e["status"]
	lat := number(e["fault"].(map[string]any)["latency_ms"])
	if !hasStatus || status != nil || lat < 300 || lat > number(e["duration_ms"]) {
		t.Errorf("the entry: status %v (present %v), latency_ms %v: %s", status, hasStatus, lat, r.body)
	}
	table := doppel(t, invocation{args: []string{"requests", "list", "--admin", "http://" + admin, "--proxy", "db"}})
	if !regexp.MustCompile(`(?m) TCP +- +[0-9.]+ +latency 3\d\d ms$`).MatchString(table.stdout) {
		t.Errorf("the table:\n%s", table)
	}

	if r := doppel(t, invocation{args: []string{"config", "reload", "--config", cfg}}); r.code != wantOK || !regexp.MustCompile(`^reloaded: revision [0-9a-f]{16}, 2 proxies \(1 tcp\)\n$`).MatchString(r.stdout) {
		t.Errorf("config reload: %s", r)
	}
	res, err := newClient().Post("http://"+admin+"/api/v1/config/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var reloaded map[string]any
	d = json.NewDecoder(res.Body)
	d.UseNumber()
	_ = d.Decode(&reloaded)
	res.Body.Close()
	counted("POST /api/v1/config/reload", reloaded, 2, 1)

	// An edit adding a tcp proxy: the line of its reload counts it.
	tmp := filepath.Join(dir, ".main.yaml.swp")
	if err := os.WriteFile(tmp, []byte(src+tcpProxy("cache", ports[1])), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	counted("the reload after the edit", jsonLine(p.waitLine("the reload after the edit", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "config reloaded" && strings.HasPrefix(lineField(l, "source"), "the configuration file ")
	})), 3, 2)
}
