package main

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// TestSecretsNeverReachAnyOutput runs every command and request type at
// trace level with known secrets — a configured token, a token from the
// environment, the database URL's password, the Sentry DSN's key — and
// asserts none of them appears in anything Doppel prints.
func TestSecretsNeverReachAnyOutput(t *testing.T) {
	t.Parallel()
	const (
		configured = "cfg-secret-0000-4000-8000-aaaaaaaaaaaa"
		fromEnv    = "env-secret-1111-4111-8111-bbbbbbbbbbbb"
		dbPassword = "Db-Pa55word-XyZ"
		dsnKey     = "sentrykey0123456789abcdef"
	)
	base := pgtest.URL(t)
	u, _ := url.Parse(base)
	u.User = url.UserPassword(u.User.Username(), dbPassword) // trust auth ignores it
	dbURL := u.String()
	env := map[string]string{
		"DOPPEL_LOG":          "trace",
		"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + fromEnv + `", "group": "admin"}}`,
		"DOPPEL_DATABASE_URL": dbURL,
	}
	var outputs []string
	record := func(r result) result { outputs = append(outputs, r.stdout, r.stderr); return r }
	run := func(args ...string) result { return record(doppel(t, invocation{args: args, env: env})) }

	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) })
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "sentry: {dsn: 'https://"+dsnKey+"@sentry.invalid/1'}\nlogging: {level: trace, format: json}\nproxies:\n"+
		proxyYAML("zeta", strings.Replace(up.URL, "http://", "http://user:"+dbPassword+"@", 1), "")+
		"    mocks:\n      - {name: mm, request: {method: GET, url: '^/m$'}, response: {status: 200, body: 'hi {{ request_id }}'}}\n")
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  tokens: [{name: root, group: admin, token: "+configured+"}]\n", 1))

	run("config", "validate", "--config", cfg)
	run("config", "migrate", "--status")
	run("config", "migrate")
	run("config", "push", "--config", cfg)
	run("config", "push", "--config", cfg, "--if-revision", "0000000000000000")
	run("config", "validate", "--store", "postgres")
	run("config", "pull", "--database-url", "postgres://x:"+dbPassword+"@127.0.0.1:1/db?connect_timeout=1")
	run("config", "migrate", "--database-url", "postgres://x:"+dbPassword+"@127.0.0.1:1/db?connect_timeout=1")

	sock := filepath.Join(t.TempDir(), "s.sock")
	p := startProc(t, invocation{args: []string{"serve", "--store", "postgres", "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", sock}, env: env})
	proxyAddr := p.waitServing()
	adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")
	c := newClient()
	for _, path := range []string{"/x", "/m", "/%2e%2e/x"} {
		_, _ = get(c, "http://"+proxyAddr+path, nil)
	}
	for _, tok := range []string{"", configured, fromEnv, "wrong-token-value-0000000000000000"} {
		for _, path := range []string{"/api/v1/proxies", "/api/v1/proxies/zeta", "/api/v1/access", "/api/v1/status", "/metrics"} {
			req, _ := http.NewRequest("GET", "http://"+adminAddr+path, nil)
			if tok != "" {
				req.Header.Set("X-Proxy-Authorization", "Bearer "+tok)
			}
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}
		req, _ := http.NewRequest("POST", "http://"+adminAddr+"/api/v1/config/reload", nil)
		req.Header.Set("X-Proxy-Authorization", "Bearer "+tok)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}
	run("config", "reload", "--socket", sock)
	added := run("token", "add", "--name", "deploy", "--socket", sock)
	if added.code != 0 {
		t.Fatalf("token add: %s", added)
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)
	outputs = append(outputs, p.stdout(), p.stderr.String())

	for _, secret := range []string{configured, fromEnv, dbPassword, dsnKey} {
		for i, out := range outputs {
			if strings.Contains(out, secret) {
				t.Errorf("output %d shows the secret %q:\n%s", i, secret, excerpt(out, secret))
			}
		}
	}
	// The startup line names the DSN's source and its host, as 1.1's does.
	var sentry map[string]any
	for _, l := range p.jsonLines() {
		if l["message"] == "sentry reporting enabled" {
			sentry = l
		}
	}
	if dsn, _ := sentry["dsn"].(string); sentry == nil || sentry["source"] != "sentry.dsn" || !strings.Contains(dsn, "sentry.invalid") {
		t.Errorf("no line says Sentry reporting is enabled, from sentry.dsn: %v", sentry)
	}
	if len(p.stdout()) < 1000 {
		t.Fatalf("trace logging wrote almost nothing: the test would prove nothing\n%s", p.stdout())
	}
}

func excerpt(s, secret string) string {
	i := strings.Index(s, secret)
	lo, hi := max(0, i-200), min(len(s), i+len(secret)+200)
	return fmt.Sprintf("...%s...", s[lo:hi])
}
