package config

import (
	"strings"
	"testing"
)

func TestATCPProxyLoadsAndKeepsItsForm(t *testing.T) {
	src := doc(`proxies:
  - name: db
    type: tcp
    listen: 127.0.0.1:15432
    upstream: db.internal:5432
    latency: {percentage: 1, min: 0.1, max: 0.2, jitter: 0.01}
    abort: {percentage: 0.1, at: body, after: 64Ki, when: {count: {every: 3}, per: {client: ip}}}
    bandwidth: {percentage: 1, bytes_per_second: 1Mi}
    hang: {percentage: 0.05, seconds: 2}
  - name: web
    type: http
    url: http://127.0.0.1:9/
`)
	d, err := Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p := d.Proxies[0]
	if p.Type != KindTCP || p.Listen.String() != "127.0.0.1:15432" || p.Upstream.String() != "db.internal:5432" || p.Resolve != nil || p.Timeout != 0 {
		t.Errorf("the tcp proxy: %+v", p)
	}
	if d.Proxies[1].ResolveType() != ResolveDefault {
		t.Error("the http proxy is not the default: the tcp one took its place")
	}
	canon, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	text := string(canon)
	for _, absent := range []string{"timeout", "body_limit", "resolve", "replace", "rewrite"} {
		if strings.Contains(text[:strings.Index(text, "name: web")], absent) {
			t.Errorf("the canonical tcp proxy has %s:\n%s", absent, text)
		}
	}
	again, err := Load(canon)
	if err != nil {
		t.Fatalf("the canonical form does not load: %v\n%s", err, canon)
	}
	r1, _ := DocumentRevision(d)
	r2, _ := DocumentRevision(again)
	if r1 != r2 {
		t.Errorf("the revision moved on a round trip: %s, %s", r1, r2)
	}
}

func TestTCPRules(t *testing.T) {
	for _, tc := range []struct{ proxy, path, msg string }{
		{"{name: db, type: tcp, upstream: 'h:1'}", "proxies[0].listen", "is required for a tcp proxy"},
		{"{name: db, type: tcp, listen: '127.0.0.1:1'}", "proxies[0].upstream", "is required for a tcp proxy"},
		{"{name: db, type: tcp, listen: 'localhost:1', upstream: 'h:1'}", "proxies[0].listen", "an IP address"},
		{"{name: db, type: tcp, listen: '127.0.0.1:1', upstream: 'h:1', url: 'http://h'}", "proxies[0].url", "no meaning on a tcp proxy"},
		{"{name: db, type: tcp, listen: '127.0.0.1:1', upstream: 'h:1', mocks: [{name: m1, request: {method: GET, url: '^/'}, response: {status: 200}}]}", "proxies[0].mocks", "no meaning on a tcp proxy"},
		{"{name: db, type: tcp, listen: '127.0.0.1:1', upstream: 'h:1', loss: {percentage: 1, status: 503}}", "proxies[0].loss", "abort {at: request}"},
		{"{name: db, type: tcp, listen: '127.0.0.1:1', upstream: 'h:1', abort: {percentage: 1, at: response}}", "proxies[0].abort.at", "no response"},
		{"{name: db, type: tcp, listen: '127.0.0.1:1', upstream: 'h:1', hang: {percentage: 1, seconds: 1, when: {per: {header: X-Key}}}}", "proxies[0].hang.when.per.header", "no headers"},
		{"{name: web, type: http}", "proxies[0].url", "is required for an http proxy"},
		{"{name: web, type: http, url: 'http://h', listen: '127.0.0.1:1'}", "proxies[0].listen", "a tcp proxy's key"},
		{"{name: web, type: http, url: 'http://h', latency: {percentage: 1, min: 0, max: 0, jitter: 0.1}}", "proxies[0].latency.jitter", "a tcp proxy's"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			found := false
			for _, v := range violations(t, doc("proxies: ["+tc.proxy+"]")) {
				found = found || v.Path == tc.path && strings.Contains(v.Message, tc.msg)
			}
			if !found {
				t.Errorf("no violation at %s saying %q:\n%s", tc.path, tc.msg, (&Invalid{violations(t, doc("proxies: ["+tc.proxy+"]"))}).Error())
			}
		})
	}
}

// V50: a tcp proxy's port is its own.
func TestTCPListensAreTheirOwn(t *testing.T) {
	for _, tc := range []struct{ proxies, path, msg string }{
		{"[{name: a1, type: tcp, listen: '127.0.0.1:8080', upstream: 'h:1'}]", "proxies[0].listen", "server.port's"},
		{"[{name: a1, type: tcp, listen: '0.0.0.0:8081', upstream: 'h:1'}]", "proxies[0].listen", "admin.port's"},
		{"[{name: a1, type: tcp, listen: '127.0.0.1:9000', upstream: 'h:1'}, {name: b2, type: tcp, listen: '127.0.0.2:9000', upstream: 'h:2'}]", "proxies[1].listen", "proxies[0]'s (a1)"},
	} {
		vs := violations(t, doc("proxies: "+tc.proxies))
		if len(vs) != 1 || vs[0].Rule != "V50" || vs[0].Path != tc.path || !strings.Contains(vs[0].Message, tc.msg) {
			t.Errorf("%s: %v", tc.proxies, vs)
		}
	}
}
