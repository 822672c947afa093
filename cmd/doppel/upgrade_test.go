package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
	"github.com/jackc/pgx/v5"
)

// doppel11Token is the admin token of the configuration 1.1 wrote.
const doppel11Token = "5b3e2a10-7c4d-4f6e-8a9b-0c1d2e3f4a5b"

// writeAsDoppel11 stores a configuration in the database as Doppel 1.1's
// save leaves it: serde's JSON for the settings (every default spelled
// out, sizes as integers, options left out) and for each proxy, a
// template row, and a revision of 1.1's kind (64 bits, FNV-1a) that ours
// would not compute. It returns that revision as 1.1 prints it.
func writeAsDoppel11(t *testing.T, url string, proxyPort, adminPort int, upstreamURL string) string {
	t.Helper()
	settings := fmt.Sprintf(`{"server": {"host": "127.0.0.1", "port": %d}, "logging": {"level": "info", "format": "json"},
 "control": {"socket": "/tmp/doppel.sock"}, "templates": {"dir": "./templates"},
 "admin": {"enable": true, "host": "127.0.0.1", "port": %d, "auth": {"header": "X-Proxy-Authorization"},
  "tokens": [{"name": "ops", "group": "admin", "token": %q}],
  "access": {"list": ["admin"], "read": ["admin"], "create": ["admin"], "update": ["admin"], "delete": ["admin"], "upload": ["admin"]},
  "upload": {"limit": 10485760}, "title": "Shop (1.1)"}}`, proxyPort, adminPort, doppel11Token)
	api := fmt.Sprintf(`{"name": "api", "type": "http", "url": %q, "resolve": {"type": "default"}, "body_limit": 1048576,
 "latency": {"percentage": 0.0, "min": 0.1, "max": 0.2},
 "mocks": [
  {"name": "hello", "request": {"method": "GET", "url": "^/hello/(?P<who>[a-z]+)$"}, "response": {"status": 200, "json": "{\"hi\": \"{{ who }}\"}"}},
  {"name": "page", "request": {"method": "GET", "url": "^/page/(?P<n>[0-9]+)$"}, "response": {"status": 200, "template": "page.j2", "headers": {"X-Page": "{{ n }}"}}}]}`, upstreamURL)
	beta := fmt.Sprintf(`{"name": "beta", "type": "http", "url": %q, "timeout": 5, "resolve": {"type": "header", "header": "X-Proxy-Name"},
 "headers": {"X-From": "doppel"}, "rewrite_redirects": false, "body_limit": 65536}`, upstreamURL)
	h := fnv.New64a()
	h.Write([]byte(settings + api + beta))
	revision := int64(h.Sum64())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO configurations (name, revision, settings) VALUES ('default', $1, $2)`, []any{revision, settings}},
		{`INSERT INTO proxies (config, name, ordinal, document) VALUES ('default', 'api', 0, $1), ('default', 'beta', 1, $2)`, []any{api, beta}},
		{`INSERT INTO templates (config, proxy, file, content) VALUES ('default', 'api', 'page.j2', $1)`, []any{[]byte("page {{ n }} as 1.1 left it")}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	return fmt.Sprintf("%016x", uint64(revision))
}

// TestADoppel11DatabaseIsUsedInPlace is the upgrade as a user of 1.1's
// PostgreSQL store makes it (SPEC §19.3): a database exactly as 1.1 leaves
// it, holding proxies, mocks, a token and a template; `config migrate`
// applies ours only; serve serves 1.1's proxies and mocks at 1.1's
// revision; an admin write, a template upload and `config pull` work; and
// 1.1's tables, columns and ledger rows are afterwards as 1.1 needs them.
func TestADoppel11DatabaseIsUsedInPlace(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	pgtest.Doppel11(t, url)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s from=%s", r.URL.Path, r.Header.Get("X-From"))
	})
	// The ports 1.1's row names are not bound: serve is given its own.
	rev11 := writeAsDoppel11(t, url, 8080, 8081, up.URL)
	catalog11, ledger11 := pgtest.Catalog(t, url), pgtest.Ledger(t, url)
	run := func(args ...string) result { return doppel(t, invocation{args: args}) }

	if r := pgServe(t, url); r.code != 1 || !strings.Contains(r.stderr, "the database schema is not ready (migration 6 (sessions) has not been applied); run `doppel config migrate`") {
		t.Fatalf("serve before migrate: %s", r)
	}
	if r := run("config", "migrate", "--status", "--database-url", url); r.code != 1 || r.stdout != "schema version 5; 5 migrations applied\n"+
		"missing: migration 6 (sessions)\nmissing: migration 7 (revisions)\nmissing: migration 8 (replicas)\nmissing: migration 9 (counters)\nrun `doppel config migrate`\n" {
		t.Fatalf("status of 1.1's database: %s", r)
	}
	if r := run("config", "migrate", "--database-url", url); r.code != 0 || r.stdout != "applied 4 migrations; 9 migrations in total\n" {
		t.Fatalf("migrate: %s", r)
	}

	dir := t.TempDir()
	p := startProc(t, invocation{dir: dir, args: []string{"serve", "--store", "postgres", "--database-url", url, "--socket", filepath.Join(dir, "s.sock"),
		"--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	proxy := "http://" + p.waitServing()
	admin := "http://" + adminAddrOf(t, p)
	if r := call(t, "GET", proxy+"/hello/ana", ""); r.status != 200 || string(r.body) != `{"hi": "ana"}` {
		t.Fatalf("1.1's json mock: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", proxy+"/page/7", ""); r.status != 200 || string(r.body) != "page 7 as 1.1 left it" || r.header.Get("X-Page") != "7" {
		t.Fatalf("1.1's template mock: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", proxy+"/orders", "", "X-Proxy-Name", "beta"); r.status != 200 || string(r.body) != "upstream /orders from=doppel" {
		t.Fatalf("1.1's header proxy: %d %s", r.status, r.body)
	}
	status := func() string {
		t.Helper()
		r := call(t, "GET", admin+"/api/v1/status", "", bearer(doppel11Token)...)
		var s struct{ Revision string }
		if err := json.Unmarshal(r.body, &s); err != nil || r.status != 200 {
			t.Fatalf("status with 1.1's token: %d %s", r.status, r.body)
		}
		return s.Revision
	}
	if got := status(); got != rev11 {
		t.Fatalf("served at revision %s, 1.1 stored %s", got, rev11)
	}

	// An admin write: a compare-and-swap on 1.1's revision.
	read := call(t, "GET", admin+"/api/v1/proxies/beta", "", bearer(doppel11Token)...)
	var beta struct{ Revision string }
	if err := json.Unmarshal(read.body, &beta); err != nil || beta.Revision == "" {
		t.Fatalf("read beta: %d %s", read.status, read.body)
	}
	body := fmt.Sprintf(`{"name": "beta", "type": "http", "url": %q, "resolve": {"type": "header", "header": "X-Proxy-Name"},
		"mocks": [{"name": "added", "request": {"method": "GET", "url": "^/added$"}, "response": {"status": 201, "body": "added after the upgrade"}}]}`, up.URL)
	if r := call(t, "PUT", admin+"/api/v1/proxies/beta", body, append(bearer(doppel11Token), "If-Match", beta.Revision)...); r.status != 200 {
		t.Fatalf("update beta: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", proxy+"/added", "", "X-Proxy-Name", "beta"); r.status != 201 || string(r.body) != "added after the upgrade" {
		t.Fatalf("the write is not served: %d %s", r.status, r.body)
	}
	ours := status()
	if ours == rev11 {
		t.Fatal("the write kept 1.1's revision")
	}

	// A template upload replaces 1.1's row.
	if r := call(t, "PUT", admin+"/api/v1/proxies/api/templates/page.j2", "page {{ n }} uploaded", bearer(doppel11Token)...); r.status != 204 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", proxy+"/page/8", ""); string(r.body) != "page 8 uploaded" {
		t.Fatalf("the uploaded template: %d %s", r.status, r.body)
	}

	pulled := run("config", "pull", "--database-url", url)
	for _, want := range []string{"name: api", "name: hello", "template: page.j2", "name: beta", "name: added", "name: ops", "title: Shop (1.1)"} {
		if pulled.code != 0 || !strings.Contains(pulled.stdout, want) {
			t.Fatalf("pull lacks %q: %s", want, pulled)
		}
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, p)
	}

	// 1.1's tables, columns and ledger rows are as 1.1 left them, and its
	// revision column holds ours, bit-cast as 1.1 stores its own.
	after := pgtest.Catalog(t, url)
	of11 := slices.DeleteFunc(slices.Clone(after), func(l string) bool {
		return !slices.Contains([]string{"configurations", "proxies", "templates", "_sqlx_migrations"}, strings.Fields(l)[1])
	})
	if !slices.Equal(of11, catalog11) {
		t.Fatalf("1.1's schema changed:\n got %q\nwant %q", of11, catalog11)
	}
	if got := pgtest.Ledger(t, url); !slices.Equal(got[:5], ledger11) || len(got) != 9 {
		t.Fatalf("1.1's ledger rows changed:\n got %q\nwant %q and ours", got, ledger11)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stored int64
	var content []byte
	if err := conn.QueryRow(ctx, `SELECT c.revision, t.content FROM configurations c JOIN templates t ON t.config = c.name WHERE c.name = 'default' AND t.file = 'page.j2'`).Scan(&stored, &content); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%016x", uint64(stored)) != ours || string(content) != "page {{ n }} uploaded" {
		t.Fatalf("stored revision %x (served %s), template %q", stored, ours, content)
	}
}
