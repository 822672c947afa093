package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const envToken = "0f0f0f0f-1111-4111-8111-0f0f0f0f0f0f"

// TestAdminAPIThroughTheBinary: a proxy created over the admin API is in
// force when the API answers: the next proxied request reaches it.
func TestAdminAPIThroughTheBinary(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "new upstream") })
	cfg := serveConfig(t, t.TempDir(), 0, 0, "")
	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	proxyAddr := p.waitServing()
	adminAddr := lineField(p.waitLine("the admin listener", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")

	if r := mustGet(t, newClient(), "http://"+proxyAddr+"/x", nil); r.status != 503 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	body := `{"proxy": {"name": "fresh", "type": "http", "url": "` + up.URL + `", "mocks": [{"name": "m1", "request": {"method": "GET", "url": "^/mocked$"}, "response": {"status": 204}}]}}`
	req, _ := http.NewRequest("POST", "http://"+adminAddr+"/api/v1/proxies", strings.NewReader(body))
	req.Header.Set("X-Proxy-Authorization", "Bearer "+envToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("create: %d", res.StatusCode)
	}
	if r := mustGet(t, newClient(), "http://"+proxyAddr+"/x", nil); r.status != 200 || string(r.body) != "new upstream" {
		t.Fatalf("after: %d %s", r.status, r.body)
	}
	// doppel_proxy_mocks follows every write: 1 after the create, 0 once
	// the proxy is deleted.
	if m := mustGet(t, newClient(), "http://"+adminAddr+"/metrics", nil); !strings.Contains(string(m.body), `doppel_proxy_mocks{proxy="fresh"} 1`) {
		t.Errorf("after the create:\n%s", m.body)
	}
	del, _ := http.NewRequest("DELETE", "http://"+adminAddr+"/api/v1/proxies/fresh", nil)
	del.Header.Set("X-Proxy-Authorization", "Bearer "+envToken)
	if res, err := http.DefaultClient.Do(del); err != nil || res.StatusCode != 204 {
		t.Fatalf("delete: %v %v", res, err)
	}
	if m := mustGet(t, newClient(), "http://"+adminAddr+"/metrics", nil); !strings.Contains(string(m.body), `doppel_proxy_mocks{proxy="fresh"} 0`) {
		t.Errorf("after the delete:\n%s", m.body)
	}
	for _, leak := range []string{p.stdout(), p.stderr.String()} {
		if strings.Contains(leak, envToken) {
			t.Fatal("a token reached the output")
		}
	}
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(exitTimeout); code != wantOK {
		t.Fatalf("exit %d\n%s", code, p)
	}
}

// TestAdminDisabledBindsNothing and a malformed DOPPEL_ADMIN_TOKENS fails
// startup without echoing it.
func TestAdminDisabledAndBadTokens(t *testing.T) {
	t.Parallel()
	ports := freePorts(t, 2)
	dir := t.TempDir()
	cfg := serveConfig(t, dir, ports[0], ports[1], "")
	src := strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  enable: false\n", 1)
	cfg = writeFile(t, dir, "off.yaml", src)
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	p.waitServing()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(ports[1]), time.Second); err == nil {
		c.Close()
		t.Fatal("admin.enable: false still bound the admin port")
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)

	r := doppel(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0"},
		env: map[string]string{"DOPPEL_ADMIN_TOKENS": `{"x": {"token": "secret-but-short"}}`}})
	if r.code != 1 || !strings.Contains(r.stderr, "DOPPEL_ADMIN_TOKENS") || strings.Contains(r.stderr+r.stdout, "secret-but-short") {
		t.Fatalf("%s", r)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(n int) string { return strconv.Itoa(n) }
