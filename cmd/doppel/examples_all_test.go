package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
)

// exampleChecks is what each document under examples/ is run for, beyond
// `config validate`: the claims its comments make, asked of the binary. A
// document added there without an entry fails TestEveryExample.
var exampleChecks = map[string]func(t *testing.T, root string){
	"main.yaml":          checkMainExample,
	"template-file.yaml": checkTemplateFileExample,
	"access.yaml":        checkAccessExample,
	"seeded.yaml":        checkSeededExample,
	"postgres.yaml":      checkPostgresExample,
	"retry.yaml":         checkRetryExample,
	"faults.yaml":        checkFaultsExample,
	"retries.yaml":       checkRetriesExample,
	"sessions.yaml":      checkSessionsExample,
	"tcp.yaml":           checkTCPExample,
}

// TestEveryExample validates every examples/*.yaml through the binary,
// then serves it as its comments say to (from the repository root,
// `--config examples/<name>`; here a copy of examples/ of its own) and
// checks what they promise.
func TestEveryExample(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(repoPath(t, "examples/*.yaml"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, doc := range docs {
		name := filepath.Base(doc)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := examplesTree(t)
			r := doppel(t, invocation{args: []string{"config", "validate", "--config", "examples/" + name}, dir: root})
			if r.code != wantOK || !strings.HasSuffix(r.stdout, validOutput) {
				t.Fatalf("config validate: %s", r)
			}
			for _, l := range strings.Split(strings.TrimSuffix(r.stdout, validOutput), "\n") {
				if l != "" && !strings.HasPrefix(l, "advisory: ") {
					t.Fatalf("config validate printed %q: %s", l, r)
				}
			}
			check, ok := exampleChecks[name]
			if !ok {
				t.Fatalf("examples/%s has no entry in exampleChecks: say what it does, and check it", name)
			}
			check(t, root)
		})
	}
}

// examplesTree copies examples/ (documents and template files, not the
// lock files serve leaves) into a fresh directory, which serves as the
// repository root the examples are run from.
func examplesTree(t *testing.T) string {
	t.Helper()
	src, root := repoPath(t, "examples"), t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(root, "examples", rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case strings.HasSuffix(path, ".lock") || !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// served is an example being served: the process and its listeners.
type served struct {
	p            *proc
	proxy, admin string // base URLs
}

// serveExample serves examples/<name> from root as its comments say,
// except for where it listens: ports the system picks, and a control
// socket outside the tree, so that it disturbs nothing else on the machine.
func serveExample(t *testing.T, root, name string, env map[string]string, extra ...string) served {
	t.Helper()
	args := append([]string{"serve", "--config", "examples/" + name}, extra...)
	return serveArgs(t, root, env, args...)
}

func serveArgs(t *testing.T, root string, env map[string]string, args ...string) served {
	t.Helper()
	args = append(args, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "doppel.sock"))
	p := startProc(t, invocation{args: args, dir: root, env: env})
	proxy := p.waitServing()
	admin := lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
	return served{p: p, proxy: "http://" + proxy, admin: "http://" + admin}
}

// stop ends the process as Ctrl-C would and expects a clean exit.
func (s served) stop(t *testing.T) {
	t.Helper()
	s.p.signal(syscall.SIGINT)
	if code := s.p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("want exit 0:\n%s", s.p)
	}
}

// call is one request with a body and headers (name, value, ...).
func call(t *testing.T, method, url, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := newClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// bearer is the admin token header for a token.
func bearer(token string) []string {
	return []string{"X-Proxy-Authorization", "Bearer " + token}
}

// exampleSource is the text of examples/<name>.
func exampleSource(t *testing.T, root, name string) string {
	t.Helper()
	return readFile(t, filepath.Join(root, "examples", name))
}

// wantQuoted fails unless the document's comments quote text as an indented
// block ("#   " before each line), so the test and the comment say the
// same thing.
func wantQuoted(t *testing.T, src, text string) {
	t.Helper()
	var b strings.Builder
	for l := range strings.SplitSeq(text, "\n") {
		b.WriteString(strings.TrimRight("#   "+l, " ") + "\n")
	}
	if !strings.Contains(src, b.String()) {
		t.Errorf("the comments do not quote what the test checks:\n%s", b.String())
	}
}

// checkMainExample: what the README says the first command gives you. The
// shop's mocks are asked everything in TestExampleMocksAnswerAsTheirCommentsSay.
func checkMainExample(t *testing.T, root string) {
	s := serveExample(t, root, "main.yaml", nil)
	if r := call(t, "GET", s.proxy+"/health", "", "X-Backend", "shop"); r.status != 200 || string(r.body) != "ok from shop" {
		t.Errorf("GET /health on shop: %d %q", r.status, r.body)
	}
	const token = "6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"
	if !strings.Contains(exampleSource(t, root, "main.yaml"), "token: "+token) {
		t.Errorf("the example no longer carries the token the README quotes")
	}
	if r := call(t, "GET", s.admin+"/api/v1/proxies", ""); r.status != 401 {
		t.Errorf("listing without a token: %d", r.status)
	}
	if r := call(t, "GET", s.admin+"/api/v1/proxies", "", bearer(token)...); r.status != 200 || !strings.Contains(string(r.body), `"name":"shop"`) {
		t.Errorf("listing with the example's token: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", s.admin+"/api/v1/status", ""); r.status != 200 || !strings.Contains(string(r.body), `"revision"`) {
		t.Errorf("status: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", s.admin+"/", ""); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("the dashboard: %d %s", r.status, r.header.Get("Content-Type"))
	}
	s.stop(t)
}

func checkTemplateFileExample(t *testing.T, root string) {
	const body = `{
  "id": 42,
  "name": "Product 42",
  "variants": [
    {"sku": "42-1"},
    {"sku": "42-2"},
    {"sku": "42-3"}
  ],
  "served_by": "catalog/product"
}`
	wantQuoted(t, exampleSource(t, root, "template-file.yaml"), body)
	s := serveExample(t, root, "template-file.yaml", nil)
	r := call(t, "GET", s.proxy+"/products/42?variants=3", "")
	if r.status != 200 || string(r.body) != body || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /products/42?variants=3: %d %q (%s)", r.status, r.body, r.header.Get("Content-Type"))
	}
	if r := call(t, "GET", s.proxy+"/products/7", ""); r.status != 200 || strings.Count(string(r.body), `"sku"`) != 2 {
		t.Errorf("without ?variants=, two: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", s.proxy+"/other", ""); r.status != 502 || envelopeCode(t, string(r.body)) != "UPSTREAM_ERROR" {
		t.Errorf("unmatched: %d %s", r.status, r.body)
	}
	// The upload the comments show replaces the file, and the next request
	// renders it.
	up := call(t, "PUT", s.admin+"/api/v1/proxies/catalog/templates/product.json.j2", `{"id": {{ id }}}`, bearer("3b0f7c1e-9d2a-4e65-8c4b-1a2f3e4d5c6b")...)
	if up.status != 204 {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	if r := call(t, "GET", s.proxy+"/products/9", ""); string(r.body) != `{"id": 9}` {
		t.Errorf("after the upload: %d %q", r.status, r.body)
	}
	s.stop(t)
}

func checkAccessExample(t *testing.T, root string) {
	const (
		ops    = "11111111-1111-4111-8111-111111111111"
		deploy = "22222222-2222-4222-8222-222222222222"
		viewer = "33333333-3333-4333-8333-333333333333"
		ci     = "44444444-4444-4444-8444-444444444444"
	)
	s := serveExample(t, root, "access.yaml", map[string]string{
		"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + ci + `", "group": "deployers"}}`,
	})
	if r := call(t, "GET", s.proxy+"/", ""); r.status != 200 || string(r.body) != "inventory is up" {
		t.Errorf("GET / on inventory: %d %q", r.status, r.body)
	}
	// The table in the comments, read by the endpoints themselves.
	cases := []struct {
		who, token, path string
		status           int
	}{
		{"nobody", "", "/api/v1/proxies", 401},
		{"nobody", "", "/api/v1/proxies/inventory", 401},
		{"ops", ops, "/api/v1/proxies", 200},
		{"ops", ops, "/api/v1/proxies/payments", 200},
		{"deploy", deploy, "/api/v1/proxies", 403},
		{"deploy", deploy, "/api/v1/proxies/inventory", 200},
		{"deploy", deploy, "/api/v1/proxies/payments", 403},
		{"viewer", viewer, "/api/v1/proxies", 403},
		{"viewer", viewer, "/api/v1/proxies/inventory", 200},
		{"viewer", viewer, "/api/v1/proxies/payments", 403},
		{"ci, from the environment", ci, "/api/v1/proxies/inventory", 200},
		{"ci, from the environment", ci, "/api/v1/proxies/payments", 403},
	}
	for _, c := range cases {
		var h []string
		if c.token != "" {
			h = bearer(c.token)
		}
		if r := call(t, "GET", s.admin+c.path, "", h...); r.status != c.status {
			t.Errorf("%s: GET %s: %d, want %d", c.who, c.path, r.status, c.status)
		}
	}
	for _, path := range []string{"/api/v1/status", "/api/v1/access", "/api/v1/schema", "/metrics", "/"} {
		if r := call(t, "GET", s.admin+path, ""); r.status != 200 {
			t.Errorf("GET %s without a token: %d", path, r.status)
		}
	}
	// Updates: deploy may change inventory, not payments; viewer neither.
	update := func(token, name string) int {
		t.Helper()
		r := call(t, "GET", s.admin+"/api/v1/proxies/"+name, "", bearer(ops)...)
		var got struct {
			Revision string          `json:"revision"`
			Proxy    json.RawMessage `json:"proxy"`
		}
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatalf("reading %s: %v %s", name, err, r.body)
		}
		body, _ := json.Marshal(got)
		return call(t, "PUT", s.admin+"/api/v1/proxies/"+name, string(body), bearer(token)...).status
	}
	if got := update(viewer, "inventory"); got != 403 {
		t.Errorf("viewer updating inventory: %d", got)
	}
	if got := update(deploy, "payments"); got != 403 {
		t.Errorf("deploy updating payments: %d", got)
	}
	if got := update(deploy, "inventory"); got != 200 {
		t.Errorf("deploy updating inventory: %d", got)
	}
	s.stop(t)
}

// checkSeededExample runs the loop the comments show on two fresh starts
// and once more without a restart.
func checkSeededExample(t *testing.T, root string) {
	const first, again = "200 503 503 200 200 503", "503 503 200 503 503 200"
	src := exampleSource(t, root, "seeded.yaml")
	wantQuoted(t, src, first)
	wantQuoted(t, src, again)
	seed := regexp.MustCompile(`--seed (\S+)`).FindStringSubmatch(src)
	if seed == nil {
		t.Fatal("the comments give no --seed")
	}
	loop := func(s served) string {
		var codes []string
		for _, id := range []string{"demo-1", "demo-2", "demo-3", "demo-4", "demo-5", "demo-6"} {
			r := call(t, "GET", s.proxy+"/flaky", "", "X-Request-ID", id)
			switch {
			case r.status == 200 && string(r.body) != "ok "+id:
				t.Errorf("%s: %q", id, r.body)
			case r.status == 503 && envelopeCode(t, string(r.body)) != "LOSS_INJECTED":
				t.Errorf("%s: %s", id, r.body)
			}
			codes = append(codes, itoa(r.status))
		}
		return strings.Join(codes, " ")
	}
	for start := range 2 {
		s := serveExample(t, root, "seeded.yaml", nil, "--seed", seed[1])
		if got := loop(s); got != first {
			t.Errorf("start %d, first loop: %s, want %s", start+1, got, first)
		}
		if start == 0 {
			if got := loop(s); got != again {
				t.Errorf("the loop again, without a restart: %s, want %s", got, again)
			}
		}
		s.stop(t)
	}
}

// checkPostgresExample follows the comments' commands on a database of its
// own (skipped without one, except under CI: see pgtest).
func checkPostgresExample(t *testing.T, root string) {
	url := pgtest.URL(t)
	env := map[string]string{"DOPPEL_DATABASE_URL": url}
	run := func(args ...string) result {
		t.Helper()
		return doppel(t, invocation{args: args, dir: root, env: env})
	}
	if r := run("serve", "--store", "postgres", "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "s.sock")); r.code != wantRejected || !strings.Contains(r.stderr, "doppel config migrate") {
		t.Fatalf("serve before migrate: %s", r)
	}
	if r := run("config", "migrate"); r.code != wantOK {
		t.Fatalf("migrate: %s", r)
	}
	r := run("config", "push", "--config", "examples/postgres.yaml")
	rev, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "pushed: revision ")
	if r.code != wantOK || !ok {
		t.Fatalf("push: %s", r)
	}
	s := serveArgs(t, root, env, "serve", "--store", "postgres")
	if r := call(t, "GET", s.proxy+"/flags", ""); r.status != 200 || string(r.body) != `{"new_checkout": false}` {
		t.Errorf("GET /flags: %d %q", r.status, r.body)
	}
	if r := call(t, "GET", s.admin+"/api/v1/status", ""); !strings.Contains(string(r.body), `"revision":"`+rev+`"`) {
		t.Errorf("status does not serve the pushed revision %s: %s", rev, r.body)
	}
	s.stop(t)
	if r := run("config", "pull"); r.code != wantOK || !strings.Contains(r.stdout, "name: flags") {
		t.Errorf("pull: %s", r)
	}
	// The database holds no template file, so there was none to write out.
	if _, err := os.Stat(filepath.Join(root, "templates")); err == nil {
		t.Errorf("templates.dir was made where serve ran with nothing to put in it")
	}
}

// offlineExamples are the examples that serve without anything else
// running: every one but the PostgreSQL one.
func offlineExamples(t *testing.T) []string {
	t.Helper()
	var names []string
	for name := range exampleChecks {
		if name != "postgres.yaml" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// checkTCPExample serves tcp.yaml with its two ports made free ones, and
// asks the relay what the comments say it answers.
func checkTCPExample(t *testing.T, root string) {
	src := exampleSource(t, root, "tcp.yaml")
	wantQuoted(t, src, `{"hello": "through the tcp relay"}`)
	ports := freePorts(t, 2)
	relay, proxy := "127.0.0.1:"+itoa(ports[0]), "127.0.0.1:"+itoa(ports[1])
	doc := strings.NewReplacer("listen: 127.0.0.1:15432", "listen: "+relay, "upstream: 127.0.0.1:8080", "upstream: "+proxy).Replace(src)
	if err := os.WriteFile(filepath.Join(root, "examples", "tcp-free.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, invocation{dir: root, args: []string{"serve", "--config", "examples/tcp-free.yaml",
		"--proxy-addr", proxy, "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "doppel.sock")}})
	p.waitServing()
	began := time.Now()
	r := call(t, "GET", "http://"+relay+"/hello", "")
	if r.status != 200 || string(r.body) != `{"hello": "through the tcp relay"}` || time.Since(began) < 300*time.Millisecond {
		t.Errorf("through the relay: %d %q after %v", r.status, r.body, time.Since(began))
	}
	p.waitLine("the connection's line", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "connection" && strings.Contains(l, `"proxy":"slow-link"`)
	})
}
