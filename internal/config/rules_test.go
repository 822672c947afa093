package config

import (
	"strings"
	"testing"
)

const tokenA = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
const tokenB = "bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"

func adminWith(extra string) string {
	return baseServer + "admin:\n  host: 127.0.0.1\n  port: 8081\n" + indent(extra, "  ")
}

// Every rule has a case that breaks it (one violation, at the path §16
// names, tagged with the rule) and a neighbour that keeps it.
func TestRules(t *testing.T) {
	mock := func(name, extra string) string {
		return "  - name: " + name + "\n    request: {method: GET, url: x}\n    response: {status: 200}\n" + indent(extra, "    ")
	}
	cases := []struct {
		rule, name, bad, path, want, good string
	}{
		{"V1", "ports differ",
			"server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 0.0.0.0, port: 8080}\n", "admin.port", "must differ from server.port",
			"server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 0.0.0.0, port: 8081}\n"},
		{"V6", "proxy names unique",
			doc("proxies:\n  - {name: zeta, type: http, url: 'http://h', resolve: {type: header, header: X-P}}\n  - {name: zeta, type: http, url: 'http://i'}"), "proxies[1].name", "duplicate proxy name `zeta`",
			doc("proxies:\n  - {name: zeta, type: http, url: 'http://h', resolve: {type: header, header: X-P}}\n  - {name: alpha, type: http, url: 'http://i'}")},
		{"V10", "one default",
			doc("proxies:\n  - {name: zeta, type: http, url: 'http://h'}\n  - {name: alpha, type: http, url: 'http://i', resolve: {type: default}}"), "proxies[1].resolve", "only one proxy may use `type: default`",
			doc("proxies:\n  - {name: zeta, type: http, url: 'http://h'}\n  - {name: alpha, type: http, url: 'http://i', resolve: {type: header, header: X-P}}")},
		{"V11", "header named",
			proxyDoc("resolve: {type: header}"), "proxies[0].resolve.header", "`header` is required when `type: header`",
			proxyDoc("resolve: {type: header, header: X-Backend}")},
		{"V14", "min <= max",
			proxyDoc("latency: {percentage: 0.5, min: 0.3, max: 0.2}"), "proxies[0].latency.min", "min must be <= max: min is 0.3 s, max is 0.2 s",
			proxyDoc("latency: {percentage: 0.5, min: 0.2, max: 0.2}")},
		{"V16", "mock names unique",
			proxyDoc("mocks:\n" + mock("zeta", "") + mock("zeta", "")), "proxies[0].mocks[1].name", "duplicate mock name `zeta`",
			proxyDoc("mocks:\n" + mock("zeta", "") + mock("alpha", ""))},
		{"V19", "variables and captures",
			mockDoc("name: mm\nrequest: {method: GET, url: '(?P<id>[0-9]+)', headers: {id: X-Id}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.headers.id", "collides with a capture group",
			mockDoc("name: mm\nrequest: {method: GET, url: '(?P<id>[0-9]+)', headers: {who: X-Id}}\nresponse: {status: 200}")},
		{"V19", "body variables and captures",
			mockDoc("name: mm\nrequest: {method: POST, url: '(?P<id>[0-9]+)', body: {id: .id}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.body.id", "collides with a capture group",
			mockDoc("name: mm\nrequest: {method: POST, url: '(?P<id>[0-9]+)', body: {item: .id}}\nresponse: {status: 200}")},
		{"V20", "one body source",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, body: a, template: t.j2}"), "proxies[0].mocks[0].response", "found body and template",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: t.j2}")},
		{"V21", "body template parses",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, body: '{{ id }'}"), "proxies[0].mocks[0].response.body", "does not parse",
			mockDoc("name: mm\nrequest: {method: GET, url: '(?P<id>x)'}\nresponse: {status: 200, body: '{{ id }}'}")},
		{"V21", "json template parses",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, json: '{% if %}{}'}"), "proxies[0].mocks[0].response.json", "does not parse",
			mockDoc("name: mm\nrequest: {method: GET, url: x, query: {a: .a}}\nresponse: {status: 200, json: '{% if a %}{}{% endif %}'}")},
		{"V21", "header template parses",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, headers: {X-Id: '{{ }}'}}"), "proxies[0].mocks[0].response.headers.X-Id", "does not parse",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, headers: {X-Id: '{{ request_id }}'}}")},
		{"V21", "external url template parses",
			"server: {host: 127.0.0.1, port: 8080, external_url: 'http://{{ host }/'}\n" + baseAdmin, "server.external_url", "does not parse",
			"server: {host: 127.0.0.1, port: 8080, external_url: 'http://{{ host }}/'}\n" + baseAdmin},
		{"V25", "mock latency min <= max",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200}\nproxy: {latency: {percentage: 1, min: 2, max: 1}}"), "proxies[0].mocks[0].proxy.latency.min", "min must be <= max",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200}\nproxy: {latency: {percentage: 1, min: 1, max: 2}}")},
		{"V26", "token names unique",
			adminWith("tokens:\n  - {name: ci, group: admin, token: " + tokenA + "}\n  - {name: ci, group: admin, token: " + tokenB + "}"), "admin.tokens[1].name", "duplicate token name `ci`",
			adminWith("tokens:\n  - {name: ci, group: admin, token: " + tokenA + "}\n  - {name: cd, group: admin, token: " + tokenB + "}")},
		{"V26", "token values unique",
			adminWith("tokens:\n  - {name: ci, group: admin, token: " + tokenA + "}\n  - {name: cd, group: admin, token: " + tokenA + "}"), "admin.tokens[1].token", "already used by admin.tokens[0]",
			adminWith("tokens:\n  - {name: ci, group: admin, token: " + tokenA + "}\n  - {name: cd, group: admin, token: " + tokenB + "}")},
		{"V27", "names exist",
			adminWith("access: {read: [bob]}"), "admin.access.read", "unknown token or group `bob`",
			adminWith("tokens: [{name: bob, group: readers, token: " + tokenA + "}]\naccess: {read: [bob, readers, user]}")},
		{"V27", "names exist per proxy",
			proxyDoc("access: {update: bob}"), "proxies[0].access.update", "unknown token or group `bob`",
			proxyDoc("access: {update: user}")},
		{"V30", "204 has no body",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 204, body: gone}"), "proxies[0].mocks[0].response", "status 204 forbids a body",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 204, headers: {X-A: b}}")},
		{"V30", "304 has no json",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 304, json: '{}'}"), "proxies[0].mocks[0].response", "status 304 forbids a body",
			mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, json: '{}'}")},
		{"V34", "no public writes",
			adminWith("access: {delete: public}"), "admin.access.delete", "`delete` must not be public",
			adminWith("access: {read: public, list: []}")},
		{"V34", "no public writes via []",
			adminWith("access: {create: []}"), "admin.access.create", "`create` must not be public",
			adminWith("public: true\naccess: {create: []}")},
		{"V34", "no public writes per proxy",
			proxyDoc("access: {upload: public}"), "proxies[0].access.upload", "`upload` must not be public",
			proxyDoc("access: {read: public}")},
		{"V36", "groups bound access",
			adminWith("groups: [admin, ci]\ntokens: [{name: bot, group: ci, token: " + tokenA + "}]\naccess: {read: [ci, user]}"), "admin.access.read", "`user` is not an allowed group; `admin.access` may name only `admin`, `ci`, `public`",
			adminWith("groups: [admin, ci]\ntokens: [{name: bot, group: ci, token: " + tokenA + "}]\naccess: {read: [ci, admin, public]}")},
		{"V36", "groups bound proxy access",
			baseServer + "admin: {host: 127.0.0.1, port: 8081, groups: [admin]}\nproxies: [{name: zeta, type: http, url: 'http://h', access: {read: user}}]\n", "proxies[0].access.read", "`proxies[0].access` may name only `admin`, `public`",
			baseServer + "admin: {host: 127.0.0.1, port: 8081, groups: ['*']}\nproxies: [{name: zeta, type: http, url: 'http://h', access: {read: user}}]\n"},
	}
	for _, c := range cases {
		t.Run(c.rule+" "+c.name, func(t *testing.T) {
			vs := violations(t, c.bad)
			if len(vs) != 1 || vs[0].Rule != c.rule || vs[0].Path != c.path || !strings.Contains(vs[0].Message, c.want) {
				t.Fatalf("got %v\nwant one %s at %q containing %q", vs, c.rule, c.path, c.want)
			}
			if vs := violations(t, c.good); len(vs) != 0 {
				t.Fatalf("the neighbouring document should be valid, got %v", vs)
			}
		})
	}
}

func TestPublicLiftsV34AndV36(t *testing.T) {
	for _, admin := range []string{
		"public: true\ngroups: [admin]\naccess: {create: public, read: [user]}",
		"groups: []\naccess: {create: public, read: [user]}",
	} {
		if vs := violations(t, adminWith(admin)); len(vs) != 0 {
			t.Errorf("%q: want no violations, got %v", admin, vs)
		}
	}
}

func TestRulesReportEverythingAtOnceInOrder(t *testing.T) {
	src := `server: {host: 127.0.0.1, port: 8080}
admin:
  host: 127.0.0.1
  port: 8080
  access: {create: public}
proxies:
  - {name: zeta, type: http, url: 'http://h', latency: {percentage: 1, min: 2, max: 1}}
  - {name: zeta, type: http, url: 'http://h', resolve: {type: header}}
`
	vs := violations(t, src)
	var got []string
	for _, v := range vs {
		got = append(got, v.Rule+" "+v.Path)
	}
	want := []string{"V1 admin.port", "V34 admin.access.create", "V14 proxies[0].latency.min", "V6 proxies[1].name", "V11 proxies[1].resolve.header"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if vs[0].Line != 4 {
		t.Errorf("V1 should point at admin.port on line 4, got %d", vs[0].Line)
	}
}

func TestTokenValuesNeverAppearInMessages(t *testing.T) {
	src := adminWith("tokens:\n  - {name: ci, group: admin, token: " + tokenA + "}\n  - {name: cd, group: admin, token: " + tokenA + "}")
	_, err := Load([]byte(src))
	if err == nil || strings.Contains(err.Error(), tokenA) {
		t.Fatalf("the token value leaked or nothing was reported: %v", err)
	}
	_, err = Load([]byte(adminWith("tokens: [{name: ci, group: admin, token: 'short secret'}]")))
	if err == nil || strings.Contains(err.Error(), "short secret") {
		t.Fatalf("a refused token value leaked: %v", err)
	}
}

func TestAdvisories(t *testing.T) {
	src := `server: {host: 0.0.0.0, port: 80}
admin:
  host: 127.0.0.1
  port: 443
  public: true
  access: {read: [user]}
proxies:
  - name: zeta
    type: http
    url: https://user:secret@h/
    resolve: {type: default, header: X-Ignored}
    access: {read: user}
    mocks:
      - name: mm
        request: {method: GET, url: '(?P<method>.*)', query: {path: .p, page: .page}}
        response: {status: 200}
`
	d := mustLoad(t, src)
	var got []string
	for _, a := range Advisories(d) {
		got = append(got, a.String())
	}
	want := []string{
		"server.port: port 80 is below 1024",
		"admin.port: port 443 is below 1024",
		"admin.public: admin.public is true",
		"admin.access, proxies[0].access are ignored while the admin API is public",
		"proxies[0].url: proxy `zeta` has a username or password in its upstream url",
		"proxies[0].resolve.header: ignored",
		"proxies[0].mocks[0].request.query.path: mock `mm` of proxy `zeta` extracts `path` into a name Doppel binds itself",
		"proxies[0].mocks[0].request.url: mock `mm` of proxy `zeta` captures `method` into a name Doppel binds itself",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d advisories, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) && !strings.Contains(got[i], want[i]) {
			t.Errorf("advisory %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
	for _, a := range got {
		if strings.Contains(a, "secret") {
			t.Errorf("an advisory leaks the URL's password: %q", a)
		}
	}
	quiet := mustLoad(t, doc("proxies: [{name: zeta, type: http, url: 'https://h/'}]"))
	if as := Advisories(quiet); len(as) != 0 {
		t.Errorf("a plain document should have no advisories, got %v", as)
	}
	empty := mustLoad(t, adminWith("groups: []"))
	if as := Advisories(empty); len(as) != 1 || !strings.Contains(as[0].Message, "read as admin.public: true") {
		t.Errorf("groups: [] should be announced as public, got %v", as)
	}
}

// TestAdvisoriesInformationalStatus: a 1xx status loads, and startup says
// at its path what the client gets instead of it; 101 is worded apart, since
// it ends the exchange rather than leading to a 200.
func TestAdvisoriesInformationalStatus(t *testing.T) {
	src := doc(`proxies:
  - name: zeta
    type: http
    url: http://127.0.0.1:9000
    loss: {percentage: 0.1, status: 100}
    mocks:
      - {name: plain, request: {method: GET, url: a}, response: {status: 200}, proxy: {loss: {percentage: 0.1, status: 503}}}
      - name: processing
        request: {method: GET, url: b}
        response: {status: 102, body: later}
        proxy: {loss: {percentage: 0.5, status: 101}}
      - {name: switching, request: {method: GET, url: c}, response: {status: 101}}
      - {name: hints, request: {method: GET, url: d}, response: {status: 103}}
`)
	d := mustLoad(t, src)
	got := map[string]string{}
	for _, a := range Advisories(d) {
		if _, dup := got[a.Path]; dup {
			t.Errorf("two advisories at %s", a.Path)
		}
		got[a.Path] = a.Message
	}
	want := map[string][]string{
		"proxies[0].loss.status":                {"status 100 is informational", "a dropped request gets a 100 interim response, then 200 OK with the LOSS_INJECTED envelope"},
		"proxies[0].mocks[1].response.status":   {"status 102 is informational", "the client gets a 102 interim response carrying the mock's headers, then 200 OK with those headers and the body"},
		"proxies[0].mocks[1].proxy.loss.status": {"a dropped request gets 101 Switching Protocols with no body, then the connection is closed"},
		"proxies[0].mocks[2].response.status":   {"the client gets 101 Switching Protocols with the mock's headers and no body, then the connection is closed"},
		"proxies[0].mocks[3].response.status":   {"status 103 is informational", "a 103 interim response"},
	}
	for path, parts := range want {
		msg, ok := got[path]
		if !ok {
			t.Errorf("no advisory at %s; got %v", path, got)
			continue
		}
		for _, part := range parts {
			if !strings.Contains(msg, part) {
				t.Errorf("%s: %q, want it to contain %q", path, msg, part)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d advisories, want %d (none for 200 or 503): %v", len(got), len(want), got)
	}
}

// TestV22IsAnAdvisory: a template reading a variable nothing binds loads,
// as in Doppel 1.1, and is said with the variables there are and the fix.
func TestV22IsAnAdvisory(t *testing.T) {
	d := mustLoad(t, mockDoc("name: mm\nrequest: {method: GET, url: '(?P<id>x)', headers: {who: X-User}}\nresponse: {status: 200, json: '{\"id\": {{ idd }}}', headers: {X-Who: '{{ whom }}'}}"))
	var got []string
	for _, a := range Advisories(d) {
		if a.Rule == "V22" {
			got = append(got, a.String())
		}
	}
	want := []string{
		"proxies[0].mocks[0].response.json: the template reads `idd` (line 1, column 11), which nothing binds, so every answer fails with 500 TEMPLATE_RENDER_ERROR; the variables here are doppel_version, host, id, method, mock_name, path, peer_ip, proxy_name, real_ip, request_id, who; write {{ idd | default('') }} if it may be missing",
		"proxies[0].mocks[0].response.headers.X-Who: the template reads `whom` (line 1, column 4)",
	}
	if len(got) != len(want) {
		t.Fatalf("V22 advisories:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("advisory %d = %q\nwant it to start %q", i, got[i], want[i])
		}
	}
	fine := mustLoad(t, mockDoc("name: mm\nrequest: {method: GET, url: '(?P<id>x)', headers: {who: X-User}}\nresponse: {status: 200, json: '{\"id\": {{ id }}, \"who\": {{ who | default(\"\") | tojson }}, \"n\": {{ n | default(0) }}}', headers: {X-Path: '{{ path }}'}}"))
	if as := Advisories(fine); len(as) != 0 {
		t.Errorf("a template reading only what is bound: %v", as)
	}
}

// TestAnAccessOverrideWithoutAdminIsSaid: an override replaces the
// default, so one that leaves admin out locks the admin tokens out.
func TestAnAccessOverrideWithoutAdminIsSaid(t *testing.T) {
	d := mustLoad(t, adminWith("tokens: [{name: rd, group: reader, token: "+tokenA+"}]\naccess: {list: [reader, admin]}\n")+
		"proxies:\n  - name: zeta\n    type: http\n    url: http://127.0.0.1:9000\n    access: {read: [reader], update: [admin, reader]}\n")
	var got []string
	for _, a := range Advisories(d) {
		got = append(got, a.String())
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "proxies[0].access.read: [reader] replaces the default [admin]: admin tokens are refused read on this proxy and its journal entries (403)") ||
		!strings.Contains(got[0], "write [reader, admin]") {
		t.Fatalf("advisories: %q", got)
	}
	whole := mustLoad(t, adminWith("tokens: [{name: rd, group: reader, token: "+tokenA+"}]\naccess: {update: [reader]}\n"))
	if as := Advisories(whole); len(as) != 1 || as[0].Path != "admin.access.update" || !strings.Contains(as[0].Message, "the whole admin API") {
		t.Fatalf("admin.access without admin: %v", as)
	}
}

// TestMissingTemplates: a template file that is not there is an advisory,
// not a refusal (it may be uploaded later).
func TestMissingTemplates(t *testing.T) {
	d := mustLoad(t, mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: page.j2}")+"")
	var asked []string
	as := MissingTemplates(d, func(proxy, file string) bool { asked = append(asked, proxy+"/"+file); return false })
	if len(as) != 1 || as[0].Path != "proxies[0].mocks[0].response.template" || !strings.Contains(as[0].Message, "zeta/page.j2 is not in templates.dir") {
		t.Fatalf("advisories %v (asked %v)", as, asked)
	}
	if as := MissingTemplates(d, func(string, string) bool { return true }); len(as) != 0 {
		t.Fatalf("a file that is there: %v", as)
	}
}
