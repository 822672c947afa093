package main

import (
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// advisedProxies is a document Doppel 1.1 loads that has three
// advisories: an access override without admin, a template variable that
// nothing binds (V22) and a template file not uploaded yet.
const advisedProxies = `proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9
    access: {read: [user]}
    mocks:
      - name: hello
        request: {method: GET, url: '^/hello$'}
        response: {status: 200, body: 'hi {{ nobody }}'}
      - name: page
        request: {method: GET, url: '^/page$'}
        response: {status: 200, template: page.j2}
`

var advisedPaths = []string{
	"proxies[0].access.read: [user] replaces the default [admin]",
	"proxies[0].mocks[0].response.body: the template reads `nobody`",
	"proxies[0].mocks[1].response.template: the template file shop/page.j2 is not in templates.dir",
}

// TestAdvisoriesLoadAndStrictRefuses: what 1.1 loads, Doppel loads; the
// advisories are printed by validate and logged by serve, and --strict
// refuses them on both.
func TestAdvisoriesLoadAndStrictRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, advisedProxies)

	r := doppel(t, invocation{args: []string{"config", "validate", "--config", cfg}})
	if r.code != wantOK || !strings.HasSuffix(r.stdout, "\n"+validOutput) {
		t.Fatalf("validate: %s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, validOutput), "\n")
	for i, want := range advisedPaths {
		if i >= len(lines) || !strings.HasPrefix(lines[i], "advisory: "+want) {
			t.Errorf("advisory line %d: want %q, got:\n%s", i, want, r.stdout)
		}
	}
	strict := doppel(t, invocation{args: []string{"config", "validate", "--strict", "--config", cfg}})
	if strict.code != wantRejected || strings.Contains(strict.stdout, validOutput) {
		t.Fatalf("validate --strict: %s", strict)
	}
	for _, want := range advisedPaths {
		if !strings.Contains(strict.stdout, want) || strings.Contains(strict.stdout, "advisory: ") {
			t.Errorf("validate --strict: want the violation %q:\n%s", want, strict)
		}
	}
	refused := startProc(t, invocation{args: []string{"serve", "--strict", "--config", cfg, "--proxy-addr", "127.0.0.1:0"}})
	if code := refused.waitExit(exitTimeout); code != wantRejected || !strings.Contains(refused.stderr.String(), "--strict") {
		t.Fatalf("serve --strict: exit %d\n%s", code, refused)
	}
	for _, want := range advisedPaths {
		if !strings.Contains(refused.stderr.String(), want) {
			t.Errorf("serve --strict does not name %q:\n%s", want, refused)
		}
	}

	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}, "rd": {"token": "` + readerToken + `", "group": "user"}}`},
	})
	proxy := "http://" + p.waitServing()
	admin := "http://" + lineField(p.waitLine("the admin listener", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
	var warned []string
	for _, l := range p.jsonLines() {
		if l["level"] == "WARN" {
			warned = append(warned, l["path"].(string)+": "+l["message"].(string))
		}
	}
	for _, want := range advisedPaths {
		if !slices.ContainsFunc(warned, func(w string) bool { return strings.HasPrefix(w, want) }) {
			t.Errorf("serve did not warn %q; warned:\n%s", want, strings.Join(warned, "\n"))
		}
	}
	// The unbound variable fails the mock at request time, as in 1.1.
	if r := mustGet(t, newClient(), proxy+"/hello", nil); r.status != 500 || !strings.Contains(string(r.body), "TEMPLATE_RENDER_ERROR") {
		t.Errorf("GET /hello: %d %s", r.status, r.body)
	}
	// The file is missing until it is uploaded, and then served.
	if r := mustGet(t, newClient(), proxy+"/page", nil); r.status != 500 || !strings.Contains(string(r.body), "TEMPLATE_NOT_FOUND") {
		t.Errorf("GET /page before the upload: %d %s", r.status, r.body)
	}
	if up := call(t, "PUT", admin+"/api/v1/proxies/shop/templates/page.j2", "page {{ path }}", bearer(envToken)...); up.status/100 != 2 {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	if r := mustGet(t, newClient(), proxy+"/page", nil); r.status != 200 || string(r.body) != "page /page" {
		t.Errorf("GET /page after the upload: %d %s", r.status, r.body)
	}
	// The override is the rule: the reader reads the proxy, the admin does
	// not (which the advisory said).
	if r := call(t, "GET", admin+"/api/v1/proxies/shop", "", bearer(readerToken)...); r.status != 200 {
		t.Errorf("the reader reads shop: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", admin+"/api/v1/proxies/shop", "", bearer(envToken)...); r.status != 403 {
		t.Errorf("the admin reads shop although the override leaves admin out: %d %s", r.status, r.body)
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, p)
	}
}

const readerToken = "1e1e1e1e-2222-4222-8222-1e1e1e1e1e1e"

// TestStrictRefusesAReloadWithAnAdvisory: under serve --strict, a reload
// whose document has an advisory changes nothing and says why; without
// --strict the same reload is in force and its new advisory is logged.
func TestStrictRefusesAReloadWithAnAdvisory(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{true, false} {
		dir := t.TempDir()
		clean := "proxies:\n  - name: shop\n    type: http\n    url: http://127.0.0.1:9\n    mocks:\n      - {name: hello, request: {method: GET, url: '^/hello$'}, response: {status: 200, body: 'hi'}}\n"
		cfg := serveConfig(t, dir, 0, 0, clean)
		args := []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}
		if strict {
			args = append(args, "--strict")
		}
		p := startProc(t, invocation{args: args})
		proxy := "http://" + p.waitServing()
		src := strings.Replace(readFile(t, cfg), "body: 'hi'", "body: 'hi {{ who }}'", 1)
		if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		r := doppel(t, invocation{args: []string{"config", "reload", "--config", cfg}})
		got := mustGet(t, newClient(), proxy+"/hello", nil)
		if strict {
			if r.code != wantRejected || !strings.Contains(r.stdout+r.stderr, "proxies[0].mocks[0].response.body: the template reads `who`") {
				t.Errorf("a reload with an advisory under --strict: %s", r)
			}
			if got.status != 200 || string(got.body) != "hi" {
				t.Errorf("the refused reload changed what is served: %d %s", got.status, got.body)
			}
		} else {
			if r.code != wantOK {
				t.Errorf("reload: %s", r)
			}
			if got.status != 500 {
				t.Errorf("after the reload: %d %s", got.status, got.body)
			}
			p.waitLine("the reload's advisory", 10*time.Second, func(l string) bool {
				return lineField(l, "level") == "WARN" && lineField(l, "path") == "proxies[0].mocks[0].response.body"
			})
		}
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("exit %d\n%s", code, p)
		}
	}
}

// TestAFailedStartLeavesNothingBehind: a start that fails on a taken
// address names it and leaves the configuration's directory as it was: no
// lock file, no template directory, no control socket.
func TestAFailedStartLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, ln.Addr().(*net.TCPAddr).Port, advisedProxies)
	before := listDir(t, dir)
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0"}})
	if code := p.waitExit(exitTimeout); code != wantRejected || !strings.Contains(p.stderr.String(), ln.Addr().String()) {
		t.Fatalf("want exit 1 naming %s:\n%s", ln.Addr(), p)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("a failed start left %v behind (before: %v)", after, before)
	}
	// A start that succeeds creates nothing either; the first write makes
	// the lock file, the first upload templates.dir.
	q := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	q.waitServing()
	serving := append(slices.Clone(before), "doppel.sock")
	slices.Sort(serving)
	if after := listDir(t, dir); !slices.Equal(serving, after) {
		t.Errorf("serving made %v (before: %v)", after, before)
	}
	q.signal(syscall.SIGTERM)
	if code := q.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, q)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}
