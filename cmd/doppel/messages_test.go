package main

// What someone trying Doppel sees first (SPEC §18.3): each refusal says
// what was wrong and what to do instead.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// adminEnvelope sends one admin request with the given headers and returns
// its status and envelope.
func adminEnvelope(t *testing.T, method, url, body string, header map[string]string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var env map[string]string
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %d, not an envelope: %s", method, url, res.StatusCode, raw)
	}
	return res.StatusCode, env
}

// TestUnauthorizedSaysWhatWasSent: a 401 tells no token from a token
// Doppel does not know, and a header without the Bearer scheme, never
// echoing what was sent; a known token without the right is still 403.
func TestUnauthorizedSaysWhatWasSent(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, "")
	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"reader": {"token": "` + envToken + `", "group": "user"}}`},
	})
	p.waitServing()
	base := "http://" + lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")

	const unknown = "9a9a9a9a-2222-4222-8222-9a9a9a9a9a9a"
	for _, c := range []struct {
		what   string
		header map[string]string
		status int
		says   []string
	}{
		{"no token", nil, 401, []string{"no token was sent", "X-Proxy-Authorization: Bearer <token>"}},
		{"no Bearer scheme", map[string]string{"X-Proxy-Authorization": unknown}, 401,
			[]string{"no token was sent", "X-Proxy-Authorization is not of the form `Bearer <token>`"}},
		{"an unknown token", map[string]string{"X-Proxy-Authorization": "Bearer " + unknown}, 401,
			[]string{"Doppel does not know the token sent in X-Proxy-Authorization", "doppel token add"}},
		{"an unknown token in Authorization", map[string]string{"Authorization": "Bearer " + unknown}, 401,
			[]string{"Doppel does not know the token sent in Authorization"}},
		{"a known token without the right", map[string]string{"X-Proxy-Authorization": "Bearer " + envToken}, 403,
			[]string{"token reader may not list here"}},
	} {
		status, env := adminEnvelope(t, "GET", base+"/api/v1/proxies", "", c.header)
		want := map[int]string{401: "UNAUTHORIZED", 403: "FORBIDDEN"}[c.status]
		if status != c.status || env["code"] != want {
			t.Errorf("%s: %d %v, want %d %s", c.what, status, env, c.status, want)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(env["message"], s) {
				t.Errorf("%s: the message %q does not say %q", c.what, env["message"], s)
			}
		}
		if strings.Contains(env["message"], unknown) {
			t.Errorf("%s: the message echoes the token: %q", c.what, env["message"])
		}
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)
	if out := p.stdout() + p.stderr.String(); strings.Contains(out, unknown) || strings.Contains(out, envToken) {
		t.Error("a token reached the log")
	}
}

// TestAdminBodyNotJSON: every admin endpoint that reads a JSON body
// refuses one that is not JSON with 400 CONFIG_INVALID naming the line and
// column of the first error, also when it ends too soon.
func TestAdminBodyNotJSON(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("shop", "http://127.0.0.1:9", ""))
	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	p.waitServing()
	base := "http://" + lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
	auth := map[string]string{"X-Proxy-Authorization": "Bearer " + envToken, "Content-Type": "application/json"}
	// A comma left out on line 3, as a hand-written body has it.
	missingComma := "{\n  \"name\": \"fresh\",\n  \"type\": \"http\"\n  \"url\": \"http://127.0.0.1:9\"\n}"
	for _, c := range []struct {
		method, path, body, says string
	}{
		{"POST", "/api/v1/proxies", missingComma, `line 4, column 3: invalid character '"' after object key:value pair`},
		{"PUT", "/api/v1/proxies/shop", "{\"proxy\": {\"name\": \"shop\",\n", "line 2, column 1: the body ends before its JSON value does"},
		{"POST", "/api/v1/sessions", "{\"ttl\": 60,\n \"proxies\": {\"shop\": {}},}", "line 2, column 26: invalid character '}' looking for beginning of object key string"},
		{"POST", "/api/v1/proxies/shop/record", "{\"apply\": tru}", "line 1, column 14: invalid character '}' in literal true (expecting 'e')"},
		{"POST", "/api/v1/requests/verify", "{\"match\": {\"path\": \"^/x\"}} {}", "line 1, column 28: invalid character '{' after top-level value"},
	} {
		status, env := adminEnvelope(t, c.method, base+c.path, c.body, auth)
		if status != 400 || env["code"] != "CONFIG_INVALID" || !strings.Contains(env["message"], "not valid JSON: "+c.says) {
			t.Errorf("%s %s: %d %v, want 400 CONFIG_INVALID saying %q", c.method, c.path, status, env, c.says)
		}
	}
	// JSON of the wrong shape says where too, in JSON's words.
	status, env := adminEnvelope(t, "POST", base+"/api/v1/proxies/shop/record", "{\n  \"apply\": \"yes\"\n}", auth)
	if status != 400 || !strings.Contains(env["message"], "line 2, column 16: apply must be true or false, not a string") {
		t.Errorf("a string for a boolean: %d %v", status, env)
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)
}

// TestConfigFirstMistakes: a mis-indented key names the file, the line to
// fix and how it stands against the line above, in `config validate` and
// in `serve`; a document without admin says what to write.
func TestConfigFirstMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n  - name: shop\n    type: http\n     url: http://127.0.0.1:9\n")
	line := strings.Count(readFile(t, cfg), "\n") // the url's, the last
	want := fmt.Sprintf("%s: YAML syntax error at column 6: mapping value is not allowed in this context; "+
		"check the indentation of line %d: `url` starts in column 6, deeper than line %d (column 5), so it reads as more of that line's value; "+
		"the keys of one mapping start in the same column (line %d)\n", cfg, line, line-1, line)

	r := doppel(t, invocation{args: []string{"config", "validate", "--config", cfg}})
	if r.code != wantRejected || r.stdout != want || r.stderr != "" {
		t.Errorf("config validate: want exit 1 and stdout\n%s\ngot:\n%s", want, r)
	}
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
	if code := p.waitExit(exitTimeout); code != wantRejected || !strings.Contains(p.stderr.String(), want) {
		t.Errorf("serve: want exit 1 and on stderr\n%s\ngot:\n%s", want, p)
	}

	noAdmin := writeFile(t, dir, "no-admin.yaml", "server:\n  host: 127.0.0.1\n  port: 8080\n")
	r = doppel(t, invocation{args: []string{"config", "validate", "--config", noAdmin}})
	if r.code != wantRejected || !strings.HasPrefix(r.stdout, "admin: is required: where the admin API and the dashboard listen, for example `admin: {host: 127.0.0.1, port: 8081}`;") ||
		!strings.Contains(r.stdout, "`doppel token add --name me --group admin --config <this file>`") {
		t.Errorf("no admin block: want what to write, got:\n%s", r)
	}
}

// TestUpstreamFailureCause: the request line of a 502 says why the
// upstream failed, in one word and in the transport's own text, without
// the credentials of the upstream's URL or the client's query; the
// client's envelope keeps its code.
func TestUpstreamFailureCause(t *testing.T) {
	t.Parallel()
	closed := freePorts(t, 1)[0] // nothing listens there once freePorts returns
	// Reads the request, then resets the connection.
	reset := tcpServer(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096))
		_ = c.(*net.TCPConn).SetLinger(0)
	})
	// Reads the request, then closes without a word.
	eof := tcpServer(t, func(c net.Conn) { _, _ = c.Read(make([]byte, 4096)) })
	// Reads the request and never answers: the proxy's timeout ends it.
	silent := make(chan struct{})
	t.Cleanup(func() { close(silent) })
	mute := tcpServer(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096))
		<-silent
	})
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(untrusted.Close)

	proxies := "proxies:\n"
	for _, p := range []struct{ name, url string }{
		{"refused", fmt.Sprintf("http://ci:upstream-s3cret@127.0.0.1:%d/", closed)},
		{"dns", "http://nohost.invalid/"},
		{"tls", untrusted.URL + "/"},
		{"reset", "http://" + reset + "/"},
		{"eof", "http://" + eof + "/"},
	} {
		proxies += proxyYAML(p.name, p.url, "X-Backend")
	}
	proxies += proxyYAML("timeout", "http://"+mute+"/", "X-Backend") + "    timeout: 1\n"
	p, addr := serveUp(t, serveConfig(t, t.TempDir(), 0, 0, proxies), nil)

	for _, c := range []struct {
		backend, cause, says, code string
		status                     int
	}{
		{"refused", "connection_refused", "connect: connection refused", "UPSTREAM_ERROR", 502},
		{"dns", "dns", "lookup nohost.invalid", "UPSTREAM_ERROR", 502},
		{"tls", "tls", "x509:", "UPSTREAM_ERROR", 502},
		{"reset", "reset", "connection reset by peer", "UPSTREAM_ERROR", 502},
		{"eof", "eof", "EOF", "UPSTREAM_ERROR", 502},
		{"timeout", "timeout", "no answer within the proxy's timeout of 1s", "UPSTREAM_TIMEOUT", 504},
	} {
		path := "/orders/" + c.backend
		r := mustGet(t, newClient(), "http://"+addr+path+"?api_key=client-s3cret", map[string]string{"X-Backend": c.backend})
		if r.status != c.status || envelopeCode(t, string(r.body)) != c.code {
			t.Errorf("%s: the client got %d %s, want %d %s", c.backend, r.status, r.body, c.status, c.code)
		}
		line := p.waitLine("the request line of "+path, startTimeout, func(l string) bool {
			return isRequestLine(l) && lineField(l, "path") == path
		})
		got, err := decodeLine(line)
		if err != nil {
			t.Fatal(err)
		}
		errText, _ := got["error"].(string)
		if got["cause"] != c.cause || !strings.Contains(errText, c.says) || got["error_code"] != c.code {
			t.Errorf("%s: the request line says cause %v, error %q, code %v; want %s, %q, %s:\n%s", c.backend, got["cause"], errText, got["error_code"], c.cause, c.says, c.code, line)
		}
	}
	// A request that succeeds carries neither.
	for _, l := range p.jsonLines() {
		if isRequest(l) && l["status"] == json.Number("200") && (l["cause"] != nil || l["error"] != nil) {
			t.Errorf("a success with a cause: %v", l)
		}
	}
	if out := p.stdout() + p.stderr.String(); strings.Contains(out, "s3cret") {
		t.Errorf("a credential reached the log:\n%s", out)
	}
}

// TestTakenPortSaysWhichSetting: a listener whose address is taken stops
// serve naming the address, the key or flag that chose it, and the two
// ways out.
func TestTakenPortSaysWhichSetting(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests
	addr := taken.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	for _, c := range []struct {
		name     string
		server   int // 0: a free port
		admin    int
		body     string
		args     []string
		listener string
		setting  string
		chooseIn string
	}{
		{"--proxy-addr", 0, 0, "", []string{"--proxy-addr", addr}, "the proxy listener", "--proxy-addr or DOPPEL_PROXY_ADDR", "--proxy-addr"},
		{"server.port", n, 0, "", nil, "the proxy listener", "server.host and server.port", "server.port (or --proxy-addr)"},
		{"admin.port", 0, n, "", nil, "the admin listener", "admin.host and admin.port", "admin.port (or --admin-addr)"},
		{"--admin-addr", 0, 0, "", []string{"--admin-addr", addr}, "the admin listener", "--admin-addr or DOPPEL_ADMIN_ADDR", "--admin-addr"},
		{"toxiproxy.port", 0, 0, "toxiproxy: {host: 127.0.0.1, port: " + port + "}\n", nil, "the Toxiproxy API", "toxiproxy.host and toxiproxy.port", "toxiproxy.port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := serveConfig(t, t.TempDir(), c.server, c.admin, c.body)
			p := startProc(t, invocation{args: append([]string{"serve", "--config", cfg}, c.args...)})
			if code := p.waitExit(exitTimeout); code != wantRejected {
				t.Fatalf("want exit 1:\n%s", p)
			}
			want := c.listener + " cannot bind " + addr + " (set by " + c.setting + "): listen tcp " + addr + ": bind: address already in use; " +
				"another process holds the port: stop it (`ss -ltnp 'sport = :" + port + "'` shows which), or choose another port in " + c.chooseIn
			if !strings.Contains(p.stderr.String(), want) {
				t.Errorf("stderr must say\n%s\n%s", want, p)
			}
		})
	}
}

// TestValidateGivesOneOneVerdicts: documents 1.1 refuses are refused, at
// 1.1's path and with the phrase its tests pin, its checks in its order
// (a name's length before its characters, a template name's leading dot
// before its separators).
func TestValidateGivesOneOneVerdicts(t *testing.T) {
	t.Parallel()
	mock := func(template string) string {
		return "proxies:\n  - name: shop\n    type: http\n    url: http://127.0.0.1:9\n    mocks:\n" +
			"      - {name: mm, request: {method: GET, url: x}, response: {status: 200, template: '" + template + "'}}\n"
	}
	for _, c := range []struct{ name, extra, title, want string }{
		{"a blank title", "", "'  '", "admin.title: the title may not be empty or blank"},
		{"a template name with ..", mock("a..b"), "", "proxies[0].mocks[0].response.template: proxy `shop`: `a..b` must not contain `..`"},
		{"a blank template name", mock("  "), "", "proxies[0].mocks[0].response.template: proxy `shop`: a template file name may not be empty or blank"},
		{"a leading dot before a separator", mock("../x"), "", "proxies[0].mocks[0].response.template: proxy `shop`: `../x` must not start with a dot"},
		{"a name's length before its characters", "proxies:\n  - {name: '.', type: http, url: 'http://127.0.0.1:9'}\n", "", "proxies[0].name: `.` is 1 characters long: a name must be at least 2 characters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, c.extra)
			if c.title != "" {
				cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  title: "+c.title+"\n", 1))
			}
			r := doppel(t, invocation{args: []string{"config", "validate", "--config", cfg}})
			if r.code != wantRejected || !strings.HasPrefix(r.stdout, c.want) {
				t.Errorf("want exit 1 and stdout starting %q, got:\n%s", c.want, r)
			}
		})
	}
}
