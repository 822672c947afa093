package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/config -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale or the output changed; run go test ./internal/config -update and review the diff\n--- got:\n%s", path, got)
	}
}

func revision(t *testing.T, src string) Revision {
	t.Helper()
	r, err := DocumentRevision(mustLoad(t, src))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var hex16 = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestCanonicalFormGolden(t *testing.T) {
	src, err := os.ReadFile("../../examples/main.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := mustLoad(t, string(src))
	out, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "main.canonical.yaml", out)
	rev, _ := DocumentRevision(d)
	golden(t, "main.revision", []byte(rev+"\n"))
	var proxies []string
	for i := range d.Proxies {
		r, err := ProxyRevision(&d.Proxies[i])
		if err != nil {
			t.Fatal(err)
		}
		proxies = append(proxies, string(d.Proxies[i].Name)+" "+string(r))
	}
	golden(t, "main.proxy-revisions", []byte(strings.Join(proxies, "\n")+"\n"))
}

func TestCanonicalFormRoundTrips(t *testing.T) {
	src, _ := os.ReadFile("../../examples/main.yaml")
	d := mustLoad(t, string(src))
	once, _ := Canonical(d)
	twice, _ := Canonical(mustLoad(t, string(once)))
	if !bytes.Equal(once, twice) {
		t.Fatalf("loading the canonical form changed it:\n%s\n---\n%s", once, twice)
	}
}

func TestRevisionIgnoresSpelling(t *testing.T) {
	base := `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: https://api.example.com/v1
    body_limit: 1048576
    headers: {X-A: a, X-B: b}
    access: {read: [user, admin]}
    mocks:
      - name: mm
        request: {method: GET, url: x, query: {a: .a, b: .b}}
        response: {status: 200, body: hi}
`
	want := revision(t, base)
	if !hex16.MatchString(string(want)) {
		t.Fatalf("revision %q is not 16 lowercase hex digits", want)
	}
	same := map[string]string{
		"comments and block style": `# a comment
server:
  host: 127.0.0.1   # inline
  port: 8080
admin:
  host: 127.0.0.1
  port: 8081
proxies:
  - name: zeta
    type: http
    url: https://api.example.com/v1
    body_limit: 1048576
    headers:
      X-A: a
      X-B: b
    access:
      read: [user, admin]
    mocks:
      - name: mm
        request: {method: GET, url: x, query: {a: .a, b: .b}}
        response: {status: 200, body: hi}
`,
		"key order": strings.NewReplacer(
			"server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081}\n", "admin: {port: 8081, host: 127.0.0.1}\nserver: {port: 8080, host: 127.0.0.1}\n",
			"headers: {X-A: a, X-B: b}", "headers: {X-B: b, X-A: a}",
			"query: {a: .a, b: .b}", "query: {b: .b, a: .a}",
		).Replace(base),
		"1Mi for 1048576":            strings.Replace(base, "body_limit: 1048576", "body_limit: 1Mi", 1),
		"omitted default body_limit": strings.Replace(base, "    body_limit: 1048576\n", "", 1),
		"explicit defaults": strings.Replace(base, "    body_limit: 1048576\n",
			"    body_limit: 1048576\n    timeout: 30\n    replace: 1\n    rewrite_redirects: true\n    rewrite_urls: true\n    resolve: {type: default}\n", 1) +
			"logging: {level: info, format: json}\ncontrol: {socket: /tmp/doppel.sock}\ntemplates: {dir: ./templates}\nsentry: {dsn: ''}\n",
		"explicit admin defaults": strings.Replace(base, "admin: {host: 127.0.0.1, port: 8081}",
			"admin: {host: 127.0.0.1, port: 8081, enable: true, dashboard: true, title: Doppel, public: false, groups: ['*'], auth: {header: X-Proxy-Authorization}, tokens: [], upload: {limit: 1Mi}, access: {list: admin, create: [admin], update: admin, delete: admin, upload: admin, read: admin}}", 1),
		"access list order and duplicates": strings.Replace(base, "read: [user, admin]", "read: [admin, user, admin]", 1),
		"upper-case host in url":           strings.Replace(base, "https://api.example.com/v1", "https://API.Example.com/v1", 1),
		"quoted strings":                   strings.Replace(base, "body: hi", `body: "hi"`, 1),
	}
	for name, src := range same {
		if got := revision(t, src); got != want {
			t.Errorf("%s: revision %s, want %s", name, got, want)
		}
	}
	// https://h and https://h/ are one upstream.
	if revision(t, doc("proxies: [{name: zeta, type: http, url: 'https://h'}]")) != revision(t, doc("proxies: [{name: zeta, type: http, url: 'https://h/'}]")) {
		t.Error("https://h and https://h/ differ")
	}

	changed := map[string]string{
		"url path":       strings.Replace(base, "/v1", "/v2", 1),
		"body_limit":     strings.Replace(base, "body_limit: 1048576", "body_limit: 1MB", 1),
		"header value":   strings.Replace(base, "X-A: a", "X-A: z", 1),
		"header name":    strings.Replace(base, "X-A: a", "X-C: a", 1),
		"timeout":        strings.Replace(base, "    body_limit: 1048576\n", "    body_limit: 1048576\n    timeout: 31\n", 1),
		"replace":        strings.Replace(base, "    body_limit: 1048576\n", "    body_limit: 1048576\n    replace: 0.5\n", 1),
		"access":         strings.Replace(base, "read: [user, admin]", "read: [admin]", 1),
		"mock body":      strings.Replace(base, "body: hi", "body: ho", 1),
		"mock status":    strings.Replace(base, "status: 200", "status: 201", 1),
		"log level":      base + "logging: {level: debug}\n",
		"admin port":     strings.Replace(base, "port: 8081", "port: 8082", 1),
		"proxy order":    base + "  - {name: alpha, type: http, url: 'http://i', resolve: {type: header, header: X-P}}\n",
		"mock selector":  strings.Replace(base, "a: .a", "a: .z", 1),
		"rewrite off":    strings.Replace(base, "    body_limit: 1048576\n", "    body_limit: 1048576\n    rewrite_urls: false\n", 1),
		"sentry enabled": base + "sentry: {dsn: 'https://k@sentry.example.com/1'}\n",
	}
	seen := map[Revision]string{want: "base"}
	for name, src := range changed {
		got := revision(t, src)
		if other, dup := seen[got]; dup {
			t.Errorf("%s: revision %s is the same as %s's", name, got, other)
		}
		seen[got] = name
	}
}

func TestProxyOrderIsContent(t *testing.T) {
	a := doc("proxies:\n  - {name: zeta, type: http, url: 'http://h', resolve: {type: header, header: X-P}}\n  - {name: alpha, type: http, url: 'http://i', resolve: {type: header, header: X-P}}")
	b := doc("proxies:\n  - {name: alpha, type: http, url: 'http://i', resolve: {type: header, header: X-P}}\n  - {name: zeta, type: http, url: 'http://h', resolve: {type: header, header: X-P}}")
	if revision(t, a) == revision(t, b) {
		t.Fatal("swapping two proxies must change the revision: resolution tries them in order")
	}
}

func TestEditsThatCancelOutReturnToTheOldRevision(t *testing.T) {
	d := mustLoad(t, proxyDoc("timeout: 10"))
	before, _ := DocumentRevision(d)
	pBefore, _ := ProxyRevision(&d.Proxies[0])
	d.Proxies[0].Timeout = 20
	mid, _ := DocumentRevision(d)
	pMid, _ := ProxyRevision(&d.Proxies[0])
	d.Proxies[0].Timeout = 10
	after, _ := DocumentRevision(d)
	pAfter, _ := ProxyRevision(&d.Proxies[0])
	if before == mid || pBefore == pMid {
		t.Fatal("an edit did not change the revision")
	}
	if before != after || pBefore != pAfter {
		t.Fatalf("undoing an edit gave %s/%s, want %s/%s", after, pAfter, before, pBefore)
	}
}

func TestProxyRevisionIsTheProxyAlone(t *testing.T) {
	a := mustLoad(t, proxyDoc("timeout: 10"))
	b := mustLoad(t, strings.Replace(proxyDoc("timeout: 10"), "port: 8081", "port: 8082", 1))
	ra, _ := ProxyRevision(&a.Proxies[0])
	rb, _ := ProxyRevision(&b.Proxies[0])
	if ra != rb {
		t.Fatal("a change outside the proxy moved its revision")
	}
	p, err := ParseProxy([]byte("name: zeta\ntype: http\nurl: http://127.0.0.1:9000\ntimeout: 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rp, _ := ProxyRevision(p); rp != ra {
		t.Fatalf("the same proxy parsed alone has revision %s, in a document %s", rp, ra)
	}
}

func TestParseRevision(t *testing.T) {
	for _, ok := range []string{"0123456789abcdef", "ffffffffffffffff"} {
		if _, err := ParseRevision(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "not-hex-at-all!!", `"0123456789abcdef"`} {
		if _, err := ParseRevision(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
