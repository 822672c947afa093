package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// controlServe starts serve with its control socket in dir and returns it
// with the socket's path and the proxy address.
func controlServe(t *testing.T, dir string, env map[string]string) (*proc, string, string, string) {
	t.Helper()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", up.URL, ""))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, env: env})
	addr := p.waitServing()
	return p, cfg, filepath.Join(dir, "doppel.sock"), addr
}

func TestConfigReloadOverTheSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, cfg, sock, addr := controlServe(t, dir, nil)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the socket: %v %v", fi.Mode(), err)
	}
	r := doppel(t, invocation{args: []string{"config", "reload", "--socket", sock}})
	if r.code != 0 || !strings.HasPrefix(r.stdout, "reloaded: revision ") || !strings.HasSuffix(r.stdout, ", 1 proxies\n") {
		t.Fatalf("%s", r)
	}
	// Without --socket, the path comes from the configuration.
	src := readFile(t, cfg)
	writeFile(t, dir, "main.yaml", src+"logging: {level: debug, format: json}\n")
	r = doppel(t, invocation{args: []string{"config", "reload", "--config", cfg}})
	if r.code != 0 || !strings.Contains(r.stdout, "\nnote: restart needed for: logging\n") {
		t.Fatalf("%s", r)
	}

	// A bad edit is rejected while traffic flows, and no request fails.
	var failures, served atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := newClient()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if res, err := get(c, "http://"+addr+"/x", nil); err != nil || res.status != 200 {
				failures.Add(1)
			} else {
				served.Add(1)
			}
		}
	}()
	writeFile(t, dir, "main.yaml", strings.Replace(src, "proxies:", "proxies:\n  - {name: bad, type: udp, url: 'http://h'}", 1))
	for range 3 {
		r = doppel(t, invocation{args: []string{"config", "reload", "--socket", sock}})
		if r.code != 1 || !strings.HasPrefix(r.stdout, "reload rejected: CONFIG_INVALID\n") || !strings.Contains(r.stdout, "proxies[0].type") {
			t.Errorf("%s", r)
		}
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failures.Load() != 0 || served.Load() == 0 {
		t.Fatalf("%d requests failed, %d served during rejected reloads", failures.Load(), served.Load())
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("the socket was not removed on shutdown")
	}
	r = doppel(t, invocation{args: []string{"config", "reload", "--socket", sock}})
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach the control socket") {
		t.Fatalf("%s", r)
	}
}

func TestTokenAdd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, _, sock, _ := controlServe(t, dir, map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "0f0f0f0f-2222-4222-8222-0f0f0f0f0f0f"}}`})
	adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")

	r := doppel(t, invocation{args: []string{"token", "add", "--name", "deploy", "--group", "admin", "--socket", sock}})
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "added: revision ") {
		t.Fatalf("%s", r)
	}
	token := lines[1]
	// In force before the command answered.
	req, _ := http.NewRequest("GET", "http://"+adminAddr+"/api/v1/proxies", nil)
	req.Header.Set("X-Proxy-Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("the new token: %d", res.StatusCode)
	}
	if p.stdout() != "" && strings.Contains(p.stdout(), token) {
		t.Fatal("the token was logged")
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--name", "deploy"}, 1, "already exists"},
		{[]string{"--name", "ci"}, 1, "claimed by the environment (DOPPEL_ADMIN_TOKENS)"},
		{[]string{"--name", "bad.name"}, 2, "--name"},
		{[]string{}, 2, "--name"},
		{[]string{"--name", "ok", "--group", "x y"}, 2, "--group"},
	}
	for _, c := range cases {
		r := doppel(t, invocation{args: append([]string{"token", "add", "--socket", sock}, c.args...)})
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%v: %s", c.args, r)
		}
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)
}

func TestControlSocketIsNeverTakenOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, cfg, sock, _ := controlServe(t, dir, nil)
	r := doppel(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	if r.code != 1 || !strings.Contains(r.stderr, "in use by another process") {
		t.Fatalf("a second serve on a live socket: %s", r)
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatalf("the first serve lost its socket: %v", err)
	} else {
		c.Close()
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)

	// A socket file left by a crash is replaced.
	ln, _ := net.Listen("unix", sock)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	p2 := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	p2.waitServing()
	p2.signal(syscall.SIGTERM)
	if code := p2.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("over a stale socket: exit %d\n%s", code, p2)
	}

	missing := filepath.Join(dir, "no", "such", "dir", "doppel.sock")
	r = doppel(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", missing}})
	if r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Fatalf("a socket in a missing directory: %s", r)
	}
}
