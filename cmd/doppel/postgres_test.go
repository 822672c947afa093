package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

func TestMigratePushPull(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	run := func(args ...string) result { return doppel(t, invocation{args: args}) }

	r := run("config", "migrate", "--status", "--database-url", url)
	if r.code != 1 || r.stdout != "no migrations have been applied; run `doppel config migrate`\n" {
		t.Fatalf("status before: %s", r)
	}
	up := pgServe(t, url)
	if up.code != 1 || !strings.Contains(up.stderr, "doppel config migrate") {
		t.Fatalf("serve on an unmigrated database: %s", up)
	}
	if r = run("config", "migrate", "--database-url", url); r.code != 0 || r.stdout != "applied 9 migrations; 9 migrations in total\n" {
		t.Fatalf("migrate: %s", r)
	}
	if r = run("config", "migrate", "--database-url", url); r.code != 0 || r.stdout != "already up to date; 9 migrations applied\n" {
		t.Fatalf("migrate again: %s", r)
	}
	if r = run("config", "migrate", "--status", "--database-url", url); r.code != 0 || r.stdout != "schema version 9; 9 migrations applied\nup to date\n" {
		t.Fatalf("status after: %s", r)
	}

	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("zeta", "http://127.0.0.1:9", ""))
	r = run("config", "push", "--config", cfg, "--database-url", url, "--if-revision", "zz")
	if r.code != 2 || !strings.Contains(r.stderr, "--if-revision") || strings.Contains(strings.ToLower(r.stdout+r.stderr), "mismatch") {
		t.Fatalf("a malformed --if-revision: %s", r)
	}
	r = run("config", "push", "--config", cfg, "--database-url", url)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "pushed: revision ") {
		t.Fatalf("push: %s", r)
	}
	rev := strings.TrimSpace(strings.TrimPrefix(r.stdout, "pushed: revision "))
	pulled := run("config", "pull", "--database-url", url)
	if pulled.code != 0 || !strings.Contains(pulled.stdout, "name: zeta") {
		t.Fatalf("pull: %s", pulled)
	}
	back := writeFile(t, dir, "pulled.yaml", pulled.stdout)
	if r = run("config", "push", "--config", back, "--database-url", url, "--if-revision", rev); r.code != 0 || r.stdout != "pushed: revision "+rev+"\n" {
		t.Fatalf("a pulled document pushed back changed revision: %s", r)
	}
	// A refused push says why on stderr, as 1.1 does (SPEC §19.2).
	if r = run("config", "push", "--config", back, "--database-url", url, "--if-revision", "0000000000000000"); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "revision 0000000000000000") {
		t.Fatalf("a stale --if-revision: %s", r)
	}
	r = run("config", "push", "--config", back, "--database-url", url, "--config-name", "nobody", "--if-revision", rev)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "`nobody` does not exist") || strings.Contains(r.stderr, "is not at revision") {
		t.Fatalf("an --if-revision to a configuration that does not exist: %s", r)
	}
	invalid := writeFile(t, dir, "invalid.yaml", strings.Replace(readFile(t, back), "name: zeta", "name: z", 1))
	if r = run("config", "push", "--config", invalid, "--database-url", url); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "proxies[0].name") {
		t.Fatalf("an invalid document: %s", r)
	}
	out := filepath.Join(dir, "missing.yaml")
	if r = run("config", "pull", "--database-url", url, "--config-name", "nobody", "--output", out); r.code != 1 {
		t.Fatalf("pulling a missing name: %s", r)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a failed pull created its output file")
	}
	if r = run("config", "validate", "--store", "postgres", "--database-url", url); r.code != 0 || r.stdout != "configuration is valid\n" {
		t.Fatalf("validate from the database: %s", r)
	}
	r = run("config", "pull", "--database-url", "postgres://doppel:hunter2@127.0.0.1:1/x?connect_timeout=2")
	if r.code != 1 || strings.Contains(r.stdout+r.stderr, "hunter2") || r.stdout != "" {
		t.Fatalf("an unreachable database: %s", r)
	}
}

// pgServe runs serve against the database until it prints its startup
// line or exits, returning what it printed when it exited.
func pgServe(t *testing.T, url string) result {
	t.Helper()
	return doppel(t, invocation{args: []string{"serve", "--store", "postgres", "--database-url", url, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "s.sock")}})
}

// TestReplicasConverge: two serve processes on one database; a change made
// through the first one's API is served by the second within a second,
// with no reload command.
func TestReplicasConverge(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "")
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("converged")) })
	start := func() (*proc, string, string) {
		p := startProc(t, invocation{args: []string{"serve", "--store", "postgres", "--database-url", url,
			"--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "s.sock")}})
		proxyAddr := p.waitServing()
		adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")
		return p, proxyAddr, adminAddr
	}
	first, _, firstAdmin := start()
	second, secondProxy, _ := start()
	time.Sleep(300 * time.Millisecond) // the second is listening for changes

	body := `{"proxy": {"name": "fresh", "type": "http", "url": "` + up.URL + `"}}`
	res, err := http.Post("http://"+firstAdmin+"/api/v1/proxies", "application/json", strings.NewReader(body))
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create on the first: %v %v", res, err)
	}
	res.Body.Close()
	created := time.Now()
	for {
		r, err := get(newClient(), "http://"+secondProxy+"/x", nil)
		if err == nil && string(r.body) == "converged" {
			break
		}
		if time.Since(created) > time.Second {
			t.Fatalf("the second replica did not serve the change within 1s (last: %v %d %s)\n%s", err, r.status, r.body, second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("converged %v after the write answered", time.Since(created))
	for _, p := range []*proc{first, second} {
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("exit %d\n%s", code, p)
		}
	}
}

// TestSessionsReachEveryReplica: a session created on one replica is in
// force on the other within a second, and so are its update and its end;
// a stale revision is refused by the database whichever replica is asked.
func TestSessionsReachEveryReplica(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9/
    mocks:
      - {name: item, request: {method: GET, url: "^/item$"}, response: {status: 200, body: item}}
`)
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	start := func() (*proc, string, string) {
		p := startProc(t, invocation{args: []string{"serve", "--store", "postgres", "--database-url", url,
			"--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "s.sock")}})
		proxyAddr := p.waitServing()
		adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")
		return p, "http://" + proxyAddr, "http://" + adminAddr
	}
	first, _, firstAdmin := start()
	second, secondProxy, secondAdmin := start()
	time.Sleep(300 * time.Millisecond) // both listen

	within := func(what string, ok func() bool) {
		t.Helper()
		since := time.Now()
		for !ok() {
			if time.Since(since) > time.Second {
				t.Fatalf("%s: not on the second replica within 1s\n%s", what, second)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: on the second replica after %v", what, time.Since(since))
	}
	status := func() int {
		return call(t, "GET", secondProxy+"/item", "", "X-Doppel-Session", "suite-a").status
	}
	r := call(t, "POST", firstAdmin+"/api/v1/sessions", `{"id": "suite-a", "proxies": {"shop": {"mocks": [
		{"name": "down", "request": {"method": "GET", "url": "^/item$"}, "response": {"status": 503}}]}}}`)
	if r.status != 201 {
		t.Fatalf("create on the first: %d %s", r.status, r.body)
	}
	var created struct{ Revision string }
	_ = json.Unmarshal(r.body, &created)
	within("the session", func() bool { return status() == 503 })

	// The same id on the other replica is refused: the database holds it.
	if r := call(t, "POST", secondAdmin+"/api/v1/sessions", `{"id": "suite-a", "proxies": {"shop": {}}}`); r.status != 409 {
		t.Errorf("the same id on the second: %d %s", r.status, r.body)
	}
	// An update through the second replica, based on the first's revision.
	upd := call(t, "PUT", secondAdmin+"/api/v1/sessions/suite-a", `{"revision": "`+created.Revision+`", "proxies": {"shop": {"mocks": [
		{"name": "teapot", "request": {"method": "GET", "url": "^/item$"}, "response": {"status": 418}}]}}}`)
	if upd.status != 200 {
		t.Fatalf("update on the second: %d %s", upd.status, upd.body)
	}
	// The first revision is stale now, on either replica.
	if r := call(t, "PUT", firstAdmin+"/api/v1/sessions/suite-a", `{"revision": "`+created.Revision+`", "proxies": {"shop": {}}}`); r.status != 409 {
		t.Errorf("a stale revision on the first: %d %s", r.status, r.body)
	}
	within("the update", func() bool { return status() == 418 })
	if r := call(t, "DELETE", firstAdmin+"/api/v1/sessions/suite-a", ""); r.status != 204 {
		t.Fatalf("end on the first: %d %s", r.status, r.body)
	}
	within("the end", func() bool { return status() == 200 })
	for _, p := range []*proc{first, second} {
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("exit %d\n%s", code, p)
		}
	}
}
