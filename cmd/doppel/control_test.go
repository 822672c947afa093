package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store"
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
	p.waitLine("the warning of a change that waits for a restart", startTimeout, func(l string) bool {
		return lineMsg(l) == "reload accepted changes to sections that only take effect on restart" && lineField(l, "level") == "WARN"
	})

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
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "token `deploy` issued to group `admin`, revision ") ||
		lines[1] != "it is in force now, and this is the only time it is shown:" {
		t.Fatalf("%s", r)
	}
	token := lines[2]
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
		{[]string{"--name", "deploy"}, 1, "token not issued: CONFIG_INVALID\nname: a token named `deploy` already exists"},
		{[]string{"--name", "ci"}, 1, "token not issued: CONFIG_INVALID\nname: `ci` is supplied by the environment (DOPPEL_ADMIN_TOKENS), so a token issued here under that name would never authenticate"},
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

// TestTheSocketServesWhatTheCommandNames: a control socket shared by two
// configurations (the machine-wide default, say) reaches whichever Doppel
// listens on it; reload and token add for the other configuration change
// nothing there, exit 1 and say what it serves and how to reach the right
// one. --socket alone reaches any Doppel.
func TestTheSocketServesWhatTheCommandNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, cfg, sock, _ := controlServe(t, dir, nil)
	// Another configuration, in another directory, whose control.socket is
	// the same path, and whose own Doppel is not running.
	other := t.TempDir()
	otherCfg := writeFile(t, other, "main.yaml", strings.Replace(readFile(t, cfg), "zeta", "other", 1))
	before := readFile(t, cfg)
	for _, args := range [][]string{
		{"config", "reload", "--config", otherCfg},
		{"token", "add", "--name", "sneaky", "--group", "admin", "--config", otherCfg},
		{"config", "reload", "--config", otherCfg, "--socket", sock},
	} {
		r := doppel(t, invocation{args: args})
		abs, _ := filepath.EvalSymlinks(cfg)
		otherAbs, _ := filepath.EvalSymlinks(otherCfg)
		if r.code != wantRejected || !strings.Contains(r.stderr, "serves the file "+abs+", not the file "+otherAbs+": nothing was changed") ||
			!strings.Contains(r.stderr, "--socket") || strings.Contains(r.stdout, "reloaded") || strings.Contains(r.stdout, "added") {
			t.Errorf("%v: %s", args, r)
		}
	}
	if after := readFile(t, cfg); after != before {
		t.Errorf("a command for another configuration changed this one:\n%s", after)
	}
	for _, l := range p.jsonLines() {
		if strings.Contains(fmt.Sprint(l["message"]), "reload") {
			t.Errorf("the refused reload was carried out: %v", l)
		}
	}
	// Its own configuration, and --socket alone, reach it.
	if r := doppel(t, invocation{args: []string{"config", "reload", "--config", cfg}}); r.code != wantOK {
		t.Errorf("reload of its own configuration: %s", r)
	}
	// As Doppel 1.1 says it, with what is in force.
	p.waitLine("the reload's line", startTimeout, func(l string) bool {
		return lineMsg(l) == "config reloaded" && lineField(l, "level") == "INFO" && lineField(l, "revision") != ""
	})
	if r := doppel(t, invocation{args: []string{"token", "add", "--name", "mine", "--group", "admin", "--socket", sock}}); r.code != wantOK || !strings.HasPrefix(r.stdout, "token `mine` issued to group `admin`, revision ") {
		t.Errorf("token add --socket alone: %s", r)
	}
}

// TestServedNameHasNoSecret: what a command says it is for travels over
// the socket and into messages: never the database's password or user.
func TestServedNameHasNoSecret(t *testing.T) {
	for _, url := range []string{"postgres://doppel:hunter2@db.internal:5432/fleet?sslmode=disable", "host=db.internal user=doppel password=hunter2 dbname=fleet"} {
		got := servedName(store.Options{Kind: store.KindPostgres, DatabaseURL: url, ConfigName: "default"})
		if got != `the configuration "default" of the PostgreSQL database "fleet"` {
			t.Errorf("%s: %q", url, got)
		}
	}
}

// TestTheReadmesTokenAddWorks: the README's token add, run from the
// repository's root while the example serves, adds a token that may
// write; the startup hint names the same command.
func TestTheReadmesTokenAddWorks(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile("`go run ./cmd/doppel (token add [^`]+)`").FindStringSubmatch(readFile(t, repoPath(t, "README.md")))
	if m == nil {
		t.Fatal("the README shows no token add")
	}
	root := examplesTree(t)
	sock := filepath.Join(t.TempDir(), "doppel.sock")
	p := startProc(t, invocation{args: []string{"serve", "--config", "examples/main.yaml", "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", sock}, dir: root})
	p.waitServing()
	hint := p.waitLine("the token hint", 10*time.Second, func(l string) bool { return strings.Contains(lineMsg(l), "admin actions need a token") })
	if !strings.Contains(hint, "doppel token add --name NAME --group admin --config examples/main.yaml") {
		t.Errorf("the startup hint: %s", hint)
	}
	admin := adminAddrOf(t, p)
	// The example's control.socket is machine-wide; the test's is its own.
	args := append(strings.Fields(m[1]), "--socket", sock)
	r := doppel(t, invocation{args: args, dir: root})
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != wantOK || len(lines) != 3 {
		t.Fatalf("%v: %s", args, r)
	}
	created := call(t, "POST", "http://"+admin+"/api/v1/proxies", `{"proxy": {"name": "made-by-me", "type": "http", "url": "http://127.0.0.1:9", "resolve": {"type": "header", "header": "X-Me"}}}`, bearer(lines[2])...)
	if created.status != 201 {
		t.Errorf("the README's token cannot write: %d %s", created.status, created.body)
	}
}

// TestTheControlSocketNeverRemovesAFile: what is at control.socket and is
// not a socket (a regular file, a directory) refuses the start, named and
// untouched; at exit the path is removed only while it is Doppel's own
// socket; starting leaves nothing else in the directory.
func TestTheControlSocketNeverRemovesAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", "http://127.0.0.1:9", ""))
	sock := filepath.Join(dir, "doppel.sock")
	for kind, make := range map[string]func() error{
		"regular file": func() error { return os.WriteFile(sock, []byte("precious"), 0o644) },
		"directory":    func() error { return os.Mkdir(sock, 0o755) },
	} {
		if err := make(); err != nil {
			t.Fatal(err)
		}
		r := doppel(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
		if r.code != wantRejected || !strings.Contains(r.stderr, sock+" holds a "+kind+", not a socket") {
			t.Errorf("a %s at control.socket: %s", kind, r)
		}
		fi, err := os.Lstat(sock)
		if err != nil || (kind == "directory") != fi.IsDir() {
			t.Fatalf("the %s at control.socket is gone: %v", kind, err)
		}
		if kind == "regular file" && readFile(t, sock) != "precious" {
			t.Errorf("the file was changed")
		}
		if err := os.RemoveAll(sock); err != nil {
			t.Fatal(err)
		}
	}

	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	p.waitServing()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the socket: %v %v", fi, err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"doppel.sock", "main.yaml"}) {
		t.Errorf("starting left %v in the directory", got)
	}
	// Something else takes the path while it serves: it stays at exit.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, []byte("someone else's"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, p)
	}
	if got := readFile(t, sock); got != "someone else's" {
		t.Errorf("the file at the socket's path after exit: %q", got)
	}
}
