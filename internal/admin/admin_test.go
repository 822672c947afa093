package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/store/file"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

const (
	adminToken = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
	userToken  = "bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"
)

const baseDoc = `server: {host: 127.0.0.1, port: 8080}
admin:
  host: 127.0.0.1
  port: 8081
  tokens:
    - {name: root, group: admin, token: ` + adminToken + `}
    - {name: reader, group: user, token: ` + userToken + `}
  access:
    list: [admin, user]
    read: [admin, user]
proxies:
  - name: zeta
    type: http
    url: http://127.0.0.1:9001
    mocks:
      - {name: from-file, request: {method: GET, url: "^/f$"}, response: {status: 200, template: answer.json.j2}}
  - name: alpha
    type: http
    url: http://127.0.0.1:9002
    resolve: {type: header, header: X-Backend}
    access: {read: [admin]}
`

type env struct {
	*httptest.Server
	ctl  *change.Controller
	st   *file.Store
	path string
	dir  string
	jr   *journal.Journal
}

func newEnv(t *testing.T, doc string, envTokens []Token) *env {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := file.Open(path, filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := runtime.Compile(snap.Document)
	ctl := change.New(runtime.NewHolder(rt), st, nil)
	// Every answer is held to the OpenAPI document (openapi_test.go).
	jr := journal.New(snap.Document)
	api := New(ctl, envTokens, nil, jr)
	api.Metrics = telemetry.NewMetrics("test", true).Handler()
	srv := httptest.NewServer(documented(t, api))
	t.Cleanup(srv.Close)
	return &env{Server: srv, ctl: ctl, st: st, path: path, dir: dir, jr: jr}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *env) call(t *testing.T, method, path, token, body string, header ...string) answer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if strings.HasPrefix(path, "/api/v1/requests/stream") {
		// A stream ends when its client leaves: this one leaves at once
		// with what it was sent.
		time.AfterFunc(200*time.Millisecond, cancel)
	}
	req, _ := http.NewRequestWithContext(ctx, method, e.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Proxy-Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func expectCode(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.status != status || a.body["code"] != code || a.body["status"] != "error" || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s, want %d %s", a.status, a.raw, status, code)
	}
}

func TestRoutingAndEnvelopes(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	expectCode(t, e.call(t, "GET", "/api/v1/nothing", adminToken, ""), 404, "NOT_FOUND")
	expectCode(t, e.call(t, "POST", "/elsewhere", adminToken, ""), 404, "NOT_FOUND")
	a := e.call(t, "PATCH", "/api/v1/proxies/zeta", adminToken, "")
	expectCode(t, a, 405, "METHOD_NOT_ALLOWED")
	if a.header.Get("Allow") != "GET, PUT, DELETE, HEAD" {
		t.Errorf("Allow: %q", a.header.Get("Allow"))
	}
	if a := e.call(t, "GET", "/api/v1/proxies/", adminToken, ""); a.status != 200 {
		t.Errorf("a trailing slash is refused: %d", a.status)
	}
	if a := e.call(t, "GET", "/api/v1/status/", "", ""); a.status != 200 {
		t.Errorf("status with a trailing slash: %d", a.status)
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	expectCode(t, e.call(t, "GET", "/api/v1/proxies", "", ""), 401, "UNAUTHORIZED")
	expectCode(t, e.call(t, "GET", "/api/v1/proxies", "ffffffff-0000-4000-8000-ffffffffffff", ""), 401, "UNAUTHORIZED")
	a := e.call(t, "GET", "/api/v1/proxies", userToken, "")
	if a.status != 200 {
		t.Fatalf("a user may list: %d", a.status)
	}
	// The list holds only what the caller may read: alpha's own access
	// narrows its reads to admin, so its document (and what it injects)
	// is not in a user's list.
	if n := len(a.body["proxies"].([]any)); n != 1 || strings.Contains(a.raw, `"alpha"`) {
		t.Errorf("a user's list: %s", a.raw)
	}
	if a := e.call(t, "GET", "/api/v1/proxies", adminToken, ""); len(a.body["proxies"].([]any)) != 2 {
		t.Errorf("an admin's list: %s", a.raw)
	}
	// Writes default to admin: the user token is known but not allowed.
	expectCode(t, e.call(t, "POST", "/api/v1/proxies", userToken, `{"proxy": {"name": "new", "type": "http", "url": "http://h"}}`), 403, "FORBIDDEN")
	// A per-proxy override narrows reads of alpha to admin.
	expectCode(t, e.call(t, "GET", "/api/v1/proxies/alpha", userToken, ""), 403, "FORBIDDEN")
	if a := e.call(t, "GET", "/api/v1/proxies/alpha", adminToken, ""); a.status != 200 {
		t.Fatalf("admin reads alpha: %d", a.status)
	}
	// The scheme is Bearer, in the configured header or the standard
	// Authorization; the configured one wins when both are sent.
	for _, c := range []struct {
		header map[string]string
		status int
	}{
		{map[string]string{"Authorization": "Bearer " + adminToken}, 200},
		{map[string]string{"X-Token": "Bearer " + adminToken}, 401},
		{map[string]string{"Authorization": "Basic " + adminToken}, 401},
		{map[string]string{"Authorization": "Bearer " + adminToken, "X-Proxy-Authorization": "Bearer " + userToken}, 403},
	} {
		req, _ := http.NewRequest("POST", e.URL+"/api/v1/config/reload", nil)
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		res, _ := http.DefaultClient.Do(req)
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Errorf("%v: %d, want %d", c.header, res.StatusCode, c.status)
		}
	}
}

func TestDefaultsProtectReads(t *testing.T) {
	doc := strings.Replace(baseDoc, "  access:\n    list: [admin, user]\n    read: [admin, user]\n", "", 1)
	e := newEnv(t, doc, nil)
	expectCode(t, e.call(t, "GET", "/api/v1/proxies", userToken, ""), 403, "FORBIDDEN")
	expectCode(t, e.call(t, "GET", "/api/v1/proxies/zeta", userToken, ""), 403, "FORBIDDEN")
}

func TestAuthorizationBeforeExistence(t *testing.T) {
	e := newEnv(t, strings.Replace(baseDoc, "    read: [admin, user]\n", "", 1), nil)
	existing := e.call(t, "GET", "/api/v1/proxies/zeta", userToken, "")
	missing := e.call(t, "GET", "/api/v1/proxies/nowhere", userToken, "")
	if existing.status != missing.status || existing.body["code"] != missing.body["code"] || existing.status != 403 {
		t.Fatalf("existing: %d %s; missing: %d %s", existing.status, existing.raw, missing.status, missing.raw)
	}
	anonExisting := e.call(t, "DELETE", "/api/v1/proxies/zeta", "", "")
	anonMissing := e.call(t, "DELETE", "/api/v1/proxies/nowhere", "", "")
	if anonExisting.status != 401 || anonMissing.status != 401 {
		t.Fatalf("anonymous delete: %d and %d", anonExisting.status, anonMissing.status)
	}
}

func TestPublicAndGroups(t *testing.T) {
	public := strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n  public: true\n", 1)
	e := newEnv(t, public, nil)
	if a := e.call(t, "POST", "/api/v1/proxies", "", `{"proxy": {"name": "new", "type": "http", "url": "http://h", "resolve": {"type": "header", "header": "X-N"}}}`); a.status != 201 {
		t.Fatalf("public create: %d %s", a.status, a.raw)
	}
	nobody := strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n  groups: []\n", 1)
	e = newEnv(t, nobody, nil)
	if a := e.call(t, "GET", "/api/v1/proxies/alpha", "", ""); a.status != 200 {
		t.Fatalf("groups: [] is public: %d", a.status)
	}
}

func TestPolicyComesFromTheConfigurationInForce(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	const sneaky = "cccccccc-3333-4333-8333-cccccccccccc"
	src, _ := os.ReadFile(e.path)
	edited := strings.Replace(string(src), "  tokens:\n", "  tokens:\n    - {name: sneaky, group: admin, token: "+sneaky+"}\n", 1)
	if err := os.WriteFile(e.path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	expectCode(t, e.call(t, "GET", "/api/v1/proxies", sneaky, ""), 401, "UNAUTHORIZED")
	if a := e.call(t, "POST", "/api/v1/config/reload", adminToken, ""); a.status != 200 {
		t.Fatalf("reload: %d %s", a.status, a.raw)
	}
	if a := e.call(t, "GET", "/api/v1/proxies", sneaky, ""); a.status != 200 {
		t.Fatalf("after the reload the token works: %d", a.status)
	}
}

func TestEnvironmentTokens(t *testing.T) {
	const fromEnv = "dddddddd-4444-4444-8444-dddddddddddd"
	toks, err := ParseEnvTokens(`{"root": {"token": "` + fromEnv + `", "group": "admin"}, "bot": {"token": "eeeeeeee-5555-4555-8555-eeeeeeeeeeee"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if toks[0].Name != "bot" || toks[0].Group != "user" {
		t.Fatalf("group defaults to user: %+v", toks[0])
	}
	e := newEnv(t, baseDoc, toks)
	// The environment claims "root": the configured root token stops working.
	expectCode(t, e.call(t, "GET", "/api/v1/proxies", adminToken, ""), 401, "UNAUTHORIZED")
	if a := e.call(t, "GET", "/api/v1/proxies/alpha", fromEnv, ""); a.status != 200 {
		t.Fatalf("the environment's root: %d", a.status)
	}
	for _, bad := range []string{
		`not json`,
		`{"a.b": {"token": "` + fromEnv + `"}}`,
		`{"ok": {"token": "short-secret-value"}}`,
		`{"ok": {"token": "` + fromEnv + `", "group": "x y"}}`,
		`{"ok": {"group": "admin"}}`,
		`{"ok": {"token": "` + fromEnv + `", "extra": 1}}`,
	} {
		_, err := ParseEnvTokens(bad)
		if err == nil || !strings.Contains(err.Error(), EnvTokens) || strings.Contains(err.Error(), fromEnv) || strings.Contains(err.Error(), "short-secret-value") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// The entry is named in backquotes, as Doppel 1.1 names it.
	if _, err := ParseEnvTokens(`{"ci": {"token": "tooshort", "group": "admin"}}`); err == nil || !strings.Contains(err.Error(), "entry `ci`") || strings.Contains(err.Error(), "tooshort") {
		t.Errorf("a short token: %v", err)
	}
	if toks, err := ParseEnvTokens("  "); err != nil || toks != nil {
		t.Errorf("empty means none: %v %v", toks, err)
	}
}

func TestProxyLifecycle(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	create := e.call(t, "POST", "/api/v1/proxies", adminToken, `{"proxy": {"name": "omega", "type": "http", "url": "http://127.0.0.1:9003", "resolve": {"type": "header", "header": "X-Backend"}, "timeout": 5}}`)
	if create.status != 201 || create.header.Get("Location") != "/api/v1/proxies/omega" {
		t.Fatalf("create: %d %s %v", create.status, create.raw, create.header)
	}
	rev := create.body["revision"].(string)
	if create.header.Get("ETag") != `"`+rev+`"` || create.body["proxy"].(map[string]any)["timeout"] != 5.0 {
		t.Fatalf("create answer: %v %s", create.header, create.raw)
	}
	// In force when it answers.
	if p := e.ctl.Runtime().Resolve(http.Header{"X-Backend": {"omega"}}); p == nil || p.Name != "omega" {
		t.Fatal("the created proxy is not in force")
	}
	expectCode(t, e.call(t, "POST", "/api/v1/proxies", adminToken, `{"proxy": {"name": "omega", "type": "http", "url": "http://h", "resolve": {"type": "header", "header": "X-B"}}}`), 409, "CONFLICT")
	expectCode(t, e.call(t, "POST", "/api/v1/proxies", adminToken, `{"revision": "`+rev+`", "proxy": {"name": "n2", "type": "http", "url": "http://h"}}`), 400, "CONFIG_INVALID")
	expectCode(t, e.call(t, "POST", "/api/v1/proxies", adminToken, `{"proxy": {"name": "n2", "type": "http", "url": "http://h"}}`, "If-Match", `"`+rev+`"`), 400, "CONFIG_INVALID")
	// A second default proxy breaks V10: every violation is reported.
	bad := e.call(t, "POST", "/api/v1/proxies", adminToken, `{"proxy": {"name": "n3", "type": "http", "url": "http://h", "latency": {"percentage": 1, "min": 2, "max": 1}}}`)
	expectCode(t, bad, 400, "CONFIG_INVALID")
	if msg := bad.body["message"].(string); !strings.Contains(msg, "proxies[3].resolve") || !strings.Contains(msg, "min must be <= max") {
		t.Fatalf("violations: %s", msg)
	}

	read := e.call(t, "GET", "/api/v1/proxies/omega", adminToken, "")
	if read.status != 200 || read.body["revision"] != rev || read.header.Get("ETag") != `"`+rev+`"` {
		t.Fatalf("read: %d %s", read.status, read.raw)
	}
	upd := func(body string, header ...string) answer {
		return e.call(t, "PUT", "/api/v1/proxies/omega", adminToken, body, header...)
	}
	doc := `{"name": "omega", "type": "http", "url": "http://127.0.0.1:9003", "resolve": {"type": "header", "header": "X-Backend"}, "timeout": 6}`
	expectCode(t, upd(doc), 428, "REVISION_REQUIRED")
	expectCode(t, upd(doc, "If-Match", "*"), 428, "REVISION_REQUIRED")
	expectCode(t, upd(doc, "If-Match", `"not-hex"`), 400, "CONFIG_INVALID")
	expectCode(t, upd(`{"revision": "0000000000000000", "proxy": `+doc+`}`, "If-Match", rev), 400, "CONFIG_INVALID")
	expectCode(t, upd(doc, "If-Match", "0000000000000000"), 409, "REVISION_MISMATCH")
	ok := upd(doc, "If-Match", rev) // bare hex
	if ok.status != 200 || ok.body["revision"] == rev || ok.body["proxy"].(map[string]any)["timeout"] != 6.0 {
		t.Fatalf("update: %d %s", ok.status, ok.raw)
	}
	rev2 := ok.body["revision"].(string)
	expectCode(t, upd(`{"revision": "`+rev+`", "proxy": `+doc+`}`), 409, "REVISION_MISMATCH")
	if e.ctl.Runtime().Resolve(http.Header{"X-Backend": {"omega"}}).Timeout.Seconds() != 6 {
		t.Fatal("the update is not in force")
	}
	// Rename to a taken name is refused; to a free one is done.
	taken := strings.Replace(doc, `"name": "omega"`, `"name": "alpha"`, 1)
	expectCode(t, upd(`{"revision": "`+rev2+`", "proxy": `+taken+`}`), 400, "CONFIG_INVALID")
	renamed := strings.Replace(doc, `"name": "omega"`, `"name": "sigma"`, 1)
	if a := upd(`{"revision": "` + rev2 + `", "proxy": ` + renamed + `}`); a.status != 200 {
		t.Fatalf("rename: %d %s", a.status, a.raw)
	}
	expectCode(t, e.call(t, "GET", "/api/v1/proxies/omega", adminToken, ""), 404, "NOT_FOUND")
	// Delete: a stale If-Match is refused, none is fine.
	expectCode(t, e.call(t, "DELETE", "/api/v1/proxies/sigma", adminToken, "", "If-Match", rev), 409, "REVISION_MISMATCH")
	if a := e.call(t, "DELETE", "/api/v1/proxies/sigma", adminToken, ""); a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.raw)
	}
	expectCode(t, e.call(t, "DELETE", "/api/v1/proxies/sigma", adminToken, ""), 404, "NOT_FOUND")
	if e.ctl.Runtime().Resolve(http.Header{"X-Backend": {"sigma"}}) != e.ctl.Runtime().Default {
		t.Fatal("the deleted proxy is still in force")
	}
}

func TestConcurrentWritersLoseNothing(t *testing.T) {
	var src strings.Builder
	src.WriteString(baseDoc)
	for i := range 20 {
		fmt.Fprintf(&src, "  - {name: p%02d, type: http, url: 'http://h', resolve: {type: header, header: X-P}}\n", i)
	}
	e := newEnv(t, src.String(), nil)
	revs := map[string]string{}
	for i := range 20 {
		name := fmt.Sprintf("p%02d", i)
		revs[name] = e.call(t, "GET", "/api/v1/proxies/"+name, adminToken, "").body["revision"].(string)
	}
	// Twenty writers, each on its own proxy, and a second writer racing each
	// of the first five with the same revision: every own-proxy write
	// lands, and of two racing on one proxy exactly one wins.
	var wg sync.WaitGroup
	results := make([]int, 25)
	for i := range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := i % 20
			name := fmt.Sprintf("p%02d", n)
			body := fmt.Sprintf(`{"revision": "%s", "proxy": {"name": "%s", "type": "http", "url": "http://h", "resolve": {"type": "header", "header": "X-P"}, "headers": {"X-Writer": "w%d"}}}`, revs[name], name, i)
			results[i] = e.call(t, "PUT", "/api/v1/proxies/"+name, adminToken, body).status
		}()
	}
	wg.Wait()
	for n := range 20 {
		wins := 0
		for _, i := range []int{n, n + 20} {
			if i < 25 && results[i] == 200 {
				wins++
			} else if i < 25 && results[i] != 409 {
				t.Errorf("writer %d: %d", i, results[i])
			}
		}
		if wins != 1 {
			t.Errorf("proxy p%02d: %d writers won, want 1", n, wins)
		}
	}
	doc := e.ctl.Runtime().Document
	stored, _ := e.st.Load(context.Background())
	for n := range 20 {
		name := fmt.Sprintf("p%02d", n)
		if doc.Proxy(name).Headers == nil || stored.Document.Proxy(name).Headers == nil {
			t.Errorf("%s lost its update", name)
		}
	}
}

func TestTemplates(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	up := func(file, body string) answer {
		return e.call(t, "PUT", "/api/v1/proxies/zeta/templates/"+file, adminToken, body)
	}
	expectCode(t, up(".hidden", "x"), 400, "CONFIG_INVALID")
	expectCode(t, up("%2e%2e", "x"), 400, "CONFIG_INVALID")
	expectCode(t, up("a%2Fb/", "x"), 400, "CONFIG_INVALID") // a trailing slash keeps the encoding
	expectCode(t, up("undeclared.txt", "x"), 422, "TEMPLATE_NOT_DECLARED")
	expectCode(t, up("answer.json.j2", strings.Repeat("x", 2<<20)), 413, "UPLOAD_TOO_LARGE")
	if a := up("answer.json.j2", `{"v": 1}`); a.status != 204 {
		t.Fatalf("upload: %d %s", a.status, a.raw)
	}
	list := e.call(t, "GET", "/api/v1/proxies/zeta/templates", adminToken, "")
	if list.raw != `{"templates":[{"name":"answer.json.j2","size":8}]}`+"\n" {
		t.Fatalf("list: %s", list.raw)
	}
	if a := e.call(t, "GET", "/api/v1/proxies/alpha/templates", adminToken, ""); a.raw != `{"templates":[]}`+"\n" {
		t.Fatalf("empty list: %s", a.raw)
	}
	// An update whose mocks no longer name the file removes it, after the write.
	rev := e.call(t, "GET", "/api/v1/proxies/zeta", adminToken, "").body["revision"].(string)
	if a := e.call(t, "PUT", "/api/v1/proxies/zeta", adminToken, `{"name": "zeta", "type": "http", "url": "http://127.0.0.1:9001"}`, "If-Match", rev); a.status != 200 {
		t.Fatalf("update: %d %s", a.status, a.raw)
	}
	if a := e.call(t, "GET", "/api/v1/proxies/zeta/templates", adminToken, ""); a.raw != `{"templates":[]}`+"\n" {
		t.Fatalf("an undeclared file survived an update: %s", a.raw)
	}
}

func TestDeletingAProxyRemovesItsTemplates(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	if a := e.call(t, "PUT", "/api/v1/proxies/zeta/templates/answer.json.j2", adminToken, "x"); a.status != 204 {
		t.Fatal(a.raw)
	}
	if a := e.call(t, "DELETE", "/api/v1/proxies/zeta/templates/answer.json.j2", adminToken, ""); a.status != 204 {
		t.Fatal(a.raw)
	}
	expectCode(t, e.call(t, "DELETE", "/api/v1/proxies/zeta/templates/answer.json.j2", adminToken, ""), 404, "NOT_FOUND")
	_ = e.call(t, "PUT", "/api/v1/proxies/zeta/templates/answer.json.j2", adminToken, "x")
	if a := e.call(t, "DELETE", "/api/v1/proxies/zeta", adminToken, ""); a.status != 204 {
		t.Fatal(a.raw)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "templates", "zeta")); !os.IsNotExist(err) {
		t.Fatal("a deleted proxy's template files remain")
	}
}

func TestReloadStatusAccessSchema(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	src, _ := os.ReadFile(e.path)
	_ = os.WriteFile(e.path, []byte(strings.Replace(string(src), "port: 8081", "port: 8082", 1)+"logging: {level: debug}\n"), 0o644)
	a := e.call(t, "POST", "/api/v1/config/reload", adminToken, "")
	if a.status != 200 || a.body["proxies"] != 2.0 || fmt.Sprint(a.body["unapplied"]) != "[logging admin]" {
		t.Fatalf("reload: %d %s", a.status, a.raw)
	}
	_ = os.WriteFile(e.path, []byte("server: {host: 127.0.0.1, port: 1}\nadmin: {host: 127.0.0.1, port: 1}\n"), 0o644)
	before := e.ctl.Runtime()
	expectCode(t, e.call(t, "POST", "/api/v1/config/reload", adminToken, ""), 400, "CONFIG_INVALID")
	if e.ctl.Runtime() != before {
		t.Fatal("a rejected reload changed the running configuration")
	}
	expectCode(t, e.call(t, "POST", "/api/v1/config/reload", userToken, ""), 403, "FORBIDDEN")

	st := e.call(t, "GET", "/api/v1/status", "", "")
	if st.status != 200 || st.body["revision"] != string(before.Revision) {
		t.Fatalf("status: %s", st.raw)
	}
	proxies := st.body["proxies"].([]any)
	alpha := proxies[1].(map[string]any)
	if alpha["resolve"] != "header:X-Backend" || alpha["upstream"] != "http://127.0.0.1:9002/" || proxies[0].(map[string]any)["mocks"] != 1.0 {
		t.Fatalf("status proxies: %v", proxies)
	}

	anon := e.call(t, "GET", "/api/v1/access", "", "")
	if anon.body["caller"].(map[string]any)["kind"] != "anonymous" || anon.body["proxies"] != nil || anon.body["global"].(map[string]any)["list"] != false {
		t.Fatalf("anonymous access: %s", anon.raw)
	}
	user := e.call(t, "GET", "/api/v1/access", userToken, "")
	perProxy := user.body["proxies"].(map[string]any)
	if user.body["caller"].(map[string]any)["name"] != "reader" || perProxy["alpha"].(map[string]any)["read"] != false || perProxy["zeta"].(map[string]any)["read"] != true {
		t.Fatalf("user access: %s", user.raw)
	}

	schema := e.call(t, "GET", "/api/v1/schema", "", "")
	if schema.status != 200 || schema.raw != string(config.Schema()) {
		t.Fatal("the schema endpoint does not serve the schema")
	}
}

// TestABodyReportsEveryProblemAtOnce: a proxy body with a value error and a
// rule broken elsewhere in it gets both in one CONFIG_INVALID.
func TestABodyReportsEveryProblemAtOnce(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	a := e.call(t, "POST", "/api/v1/proxies", adminToken, `{"proxy": {"name": "newp", "type": "http", "url": "http://h",
		"resolve": {"type": "header", "header": "X-N"}, "loss": {"percentage": 50, "status": 503},
		"latency": {"percentage": 0.5, "min": 2, "max": 1}}}`)
	expectCode(t, a, 400, "CONFIG_INVALID")
	msg, _ := a.body["message"].(string)
	if !strings.Contains(msg, "loss.percentage: proxy `newp`: 50 is not between 0.0 and 1.0") || !strings.Contains(msg, "latency.min: proxy `newp`: min must be <= max") {
		t.Errorf("the message: %s", msg)
	}
}
