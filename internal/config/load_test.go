package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// base is a valid document whose pieces the tests replace. Each %s is
// spliced with a YAML fragment, so one case states only what it breaks.
const baseServer = "server: {host: 127.0.0.1, port: 8080}\n"
const baseAdmin = "admin: {host: 127.0.0.1, port: 8081}\n"

func doc(parts ...string) string {
	return baseServer + baseAdmin + strings.Join(parts, "\n")
}

// proxyDoc wraps one proxy's extra keys into a valid document.
func proxyDoc(extra string) string {
	return doc("proxies:\n  - name: zeta\n    type: http\n    url: http://127.0.0.1:9000\n" + indent(extra, "    "))
}

// mockDoc wraps one mock's keys into a valid document.
func mockDoc(mock string) string {
	return proxyDoc("mocks:\n  - " + strings.TrimLeft(indent(mock, "    "), " "))
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func violations(t *testing.T, src string) []Violation {
	t.Helper()
	_, err := Load([]byte(src))
	if err == nil {
		return nil
	}
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("Load returned %T, want *Invalid: %v", err, err)
	}
	return inv.Violations
}

// expectOne asserts exactly one violation at path whose message contains want.
func expectOne(t *testing.T, src, path, want string) {
	t.Helper()
	vs := violations(t, src)
	if len(vs) != 1 {
		t.Fatalf("want one violation at %s, got %d:\n%s\n--- document:\n%s", path, len(vs), (&Invalid{vs}).Error(), src)
	}
	if vs[0].Path != path || !strings.Contains(vs[0].Message, want) {
		t.Fatalf("got %q\nwant path %q with message containing %q", vs[0].String(), path, want)
	}
}

func mustLoad(t *testing.T, src string) *Document {
	t.Helper()
	d, err := Load([]byte(src))
	if err != nil {
		t.Fatalf("Load: %v\n--- document:\n%s", err, src)
	}
	return d
}

func TestValueTypesRefuseBadInput(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name, src, path, want string
	}{
		// Names.
		{"dotted proxy name", doc("proxies: [{name: Billing.API, type: http, url: 'http://h'}]"), "proxies[0].name", "no longer contain `.` (write Billing-API"},
		{"short name", doc("proxies: [{name: a, type: http, url: 'http://h'}]"), "proxies[0].name", "at least 2"},
		{"short name, its length before its characters", doc("proxies: [{name: '.', type: http, url: 'http://h'}]"), "proxies[0].name", "at least 2"},
		{"long name, its length before its characters", doc("proxies: [{name: '" + long(32) + " b', type: http, url: 'http://h'}]"), "proxies[0].name", "at most 32"},
		{"proxy name over 32", doc("proxies: [{name: " + long(33) + ", type: http, url: 'http://h'}]"), "proxies[0].name", "at most 32"},
		{"mock name over 64", mockDoc("name: " + long(65) + "\nrequest: {method: GET, url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].name", "at most 64"},
		{"space in token name", baseServer + "admin: {host: 127.0.0.1, port: 8081, tokens: [{name: 'a b', group: admin, token: " + long(32) + "}]}\n", "admin.tokens[0].name", "not a valid name"},
		{"blank title", baseServer + "admin: {host: 127.0.0.1, port: 8081, title: '  '}\n", "admin.title", "empty or blank"},
		// Addresses and ports.
		{"hostname", "server: {host: localhost, port: 8080}\n" + baseAdmin, "server.host", "not an IP address"},
		{"port 0", "server: {host: 127.0.0.1, port: 0}\n" + baseAdmin, "server.port", "any free port"},
		{"port too big", "server: {host: 127.0.0.1, port: 65536}\n" + baseAdmin, "server.port", "ports are 1 to 65535"},
		{"port as text", "server: {host: 127.0.0.1, port: http}\n" + baseAdmin, "server.port", "must be a port number"},
		// Ratios.
		{"percent for fraction", proxyDoc("loss: {percentage: 45, status: 503}"), "proxies[0].loss.percentage", "and 45% is 0.45"},
		{"ratio negative", proxyDoc("replace: -0.1"), "proxies[0].replace", "is not between 0.0 and 1.0"},
		{"ratio over 100", proxyDoc("replace: 250"), "proxies[0].replace", "is not between 0.0 and 1.0"},
		{"ratio quoted", proxyDoc("replace: '0.5'"), "proxies[0].replace", "must be a fraction"},
		// Seconds and timeouts.
		{"negative seconds", proxyDoc("latency: {percentage: 1, min: -1, max: 1}"), "proxies[0].latency.min", "negative"},
		{"seconds over 300", proxyDoc("latency: {percentage: 1, min: 0, max: 301}"), "proxies[0].latency.max", "300-second maximum"},
		{"seconds in ms", proxyDoc("latency: {percentage: 1, min: 0, max: 1500}"), "proxies[0].latency.max", "looks like milliseconds: write 1.5"},
		{"timeout 0", proxyDoc("timeout: 0"), "proxies[0].timeout", "leave `timeout` out"},
		{"timeout ms", proxyDoc("timeout: 30000"), "proxies[0].timeout", "looks like milliseconds"},
		{"timeout over 3600", proxyDoc("timeout: 3601"), "proxies[0].timeout", "3600-second maximum"},
		{"timeout fraction", proxyDoc("timeout: 1.5"), "proxies[0].timeout", "not the fraction 1.5"},
		// Sizes.
		{"bare M", proxyDoc("body_limit: 1M"), "proxies[0].body_limit", "1M: write 1Mi or 1MB"},
		{"bare k", proxyDoc("body_limit: 64k"), "proxies[0].body_limit", "64k: write 64Ki or 64kB"},
		{"size 0", proxyDoc("body_limit: 0"), "proxies[0].body_limit", "would reject everything"},
		{"size over 1GiB", proxyDoc("body_limit: 2Gi"), "proxies[0].body_limit", "1 GiB maximum"},
		{"size plain over 1GiB", proxyDoc("body_limit: 1073741825"), "proxies[0].body_limit", "1 GiB maximum"},
		{"size fraction", proxyDoc("body_limit: 1.5Mi"), "proxies[0].body_limit", "not a byte size"},
		{"size unknown unit", proxyDoc("body_limit: 1Ti"), "proxies[0].body_limit", "unknown unit"},
		// Headers.
		{"header name with space", proxyDoc("headers: {'X Id': a}"), "proxies[0].headers.X Id", "not a valid header name"},
		{"header value line break", proxyDoc("headers: {X-A: \"a\\nb\"}"), "proxies[0].headers.X-A", "may not contain a line break"},
		{"header value control", proxyDoc("headers: {X-A: \"a\\u0001b\"}"), "proxies[0].headers.X-A", "visible ASCII"},
		{"header duplicate by case", proxyDoc("headers: {X-A: a, x-a: b}"), "proxies[0].headers.x-a", "case-insensitively"},
		{"resolve header name", proxyDoc("resolve: {type: header, header: 'X:Y'}"), "proxies[0].resolve.header", "not a valid header name"},
		{"auth header name", doc()[:len(baseServer)] + "admin: {host: 127.0.0.1, port: 8081, auth: {header: 'a b'}}\n", "admin.auth.header", "not a valid header name"},
		{"mock request header name", mockDoc("name: mm\nrequest: {method: GET, url: x, headers: {who: 'X User'}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.headers.who", "not a valid header name"},
		{"mock response header name", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, headers: {'X Id': a}}"), "proxies[0].mocks[0].response.headers.X Id", "not a valid header name"},
		// Tokens.
		{"short token", baseServer + "admin: {host: 127.0.0.1, port: 8081, tokens: [{name: ci, group: admin, token: short}]}\n", "admin.tokens[0].token", "32 to 255"},
		{"token with space", baseServer + "admin: {host: 127.0.0.1, port: 8081, tokens: [{name: ci, group: admin, token: '" + long(20) + " " + long(20) + "'}]}\n", "admin.tokens[0].token", "without spaces"},
		// Methods, statuses, patterns, selectors.
		{"lower-case method", mockDoc("name: mm\nrequest: {method: get, url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.method", "use `GET`"},
		{"unknown method", mockDoc("name: mm\nrequest: {method: FETCH, url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.method", "not a method Doppel knows"},
		{"status 99", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 99}"), "proxies[0].mocks[0].response.status", "100 to 599"},
		{"status 600", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 600}"), "proxies[0].mocks[0].response.status", "100 to 599"},
		{"loss status 99", proxyDoc("loss: {percentage: 0.1, status: 99}"), "proxies[0].loss.status", "100 to 599"},
		{"loss status 600", proxyDoc("loss: {percentage: 0.1, status: 600}"), "proxies[0].loss.status", "100 to 599"},
		{"mock loss status 600", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200}\nproxy: {loss: {percentage: 0.1, status: 600}}"), "proxies[0].mocks[0].proxy.loss.status", "100 to 599"},
		{"url port out of range", doc("proxies: [{name: zeta, type: http, url: 'https://h:99999/'}]"), "proxies[0].url", "ports are 1 to 65535"},
		{"bad regex", mockDoc("name: mm\nrequest: {method: GET, url: '('}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.url", "not a valid regex"},
		{"selector without dot", mockDoc("name: mm\nrequest: {method: GET, url: x, query: {p: page}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.query.p", "leading dot"},
		{"selector empty key", mockDoc("name: mm\nrequest: {method: GET, url: x, body: {p: .a..b}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.body.p", "empty key"},
		{"selector indexing", mockDoc("name: mm\nrequest: {method: GET, url: x, body: {p: '.a[0]'}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.body.p", "indexing"},
		// Template file names.
		{"template traversal", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: ../x}"), "proxies[0].mocks[0].response.template", "must not start with a dot"},
		{"template separator", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: a/../x}"), "proxies[0].mocks[0].response.template", "must not contain a path separator"},
		{"template with ..", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: a..b}"), "proxies[0].mocks[0].response.template", "must not contain `..`"},
		{"template blank", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: ' '}"), "proxies[0].mocks[0].response.template", "empty or blank"},
		{"template backslash", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: 'a\\b'}"), "proxies[0].mocks[0].response.template", "must not contain a path separator"},
		{"template hidden", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: .env}"), "proxies[0].mocks[0].response.template", "must not start with a dot"},
		{"template dotdot", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: '..'}"), "proxies[0].mocks[0].response.template", "must not start with a dot"},
		{"template too long", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: " + long(201) + "}"), "proxies[0].mocks[0].response.template", "at most 200 bytes"},
		{"template control", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: \"a\\tb\"}"), "proxies[0].mocks[0].response.template", "control characters"},
		// URLs.
		{"url with query", doc("proxies: [{name: zeta, type: http, url: 'https://h/?a=1'}]"), "proxies[0].url", "query string"},
		{"url with bare ?", doc("proxies: [{name: zeta, type: http, url: 'https://h/?'}]"), "proxies[0].url", "query string"},
		{"url with fragment", doc("proxies: [{name: zeta, type: http, url: 'https://h/#x'}]"), "proxies[0].url", "fragment"},
		{"url scheme", doc("proxies: [{name: zeta, type: http, url: 'ftp://h/'}]"), "proxies[0].url", "absolute http or https"},
		{"url relative", doc("proxies: [{name: zeta, type: http, url: '/api'}]"), "proxies[0].url", "absolute http or https"},
		{"url no host", doc("proxies: [{name: zeta, type: http, url: 'http:///x'}]"), "proxies[0].url", "no host"},
		{"external url query", "server: {host: 127.0.0.1, port: 8080, external_url: 'http://d/?x'}\n" + baseAdmin, "server.external_url", "query string"},
		{"external template scheme", "server: {host: 127.0.0.1, port: 8080, external_url: '{{ host }}/x'}\n" + baseAdmin, "server.external_url", "literal http://"},
		// Enums and the rest.
		{"type udp", doc("proxies: [{name: zeta, type: udp, url: 'http://h'}]"), "proxies[0].type", "not a proxy type: http or tcp"},
		{"tcp listen", doc("proxies: [{name: zeta, type: tcp, listen: '127.0.0.1', upstream: 'db:5432'}]"), "proxies[0].listen", "is not HOST:PORT"},
		{"tcp port", doc("proxies: [{name: zeta, type: tcp, listen: '127.0.0.1:0', upstream: 'db:5432'}]"), "proxies[0].listen", "is not 1 to 65535"},
		{"resolve kind", proxyDoc("resolve: {type: random}"), "proxies[0].resolve.type", "not a resolve type"},
		{"log level", doc("logging: {level: verbose}"), "logging.level", "use one of trace, debug, info, warn, error"},
		{"log format", doc("logging: {format: xml}"), "logging.format", "use one of json, text"},
		{"empty socket", doc("control: {socket: ''}"), "control.socket", "may not be empty"},
		{"empty template dir", doc("templates: {dir: ''}"), "templates.dir", "may not be empty"},
		{"title too long", baseServer + "admin: {host: 127.0.0.1, port: 8081, title: " + long(65) + "}\n", "admin.title", "at most 64"},
		{"title control", baseServer + "admin: {host: 127.0.0.1, port: 8081, title: \"a\\u0007\"}\n", "admin.title", "control characters"},
		{"subject bad name", baseServer + "admin: {host: 127.0.0.1, port: 8081, access: {read: [ok, bad.name]}}\n", "admin.access.read[1]", "not a valid name"},
		{"group entry", baseServer + "admin: {host: 127.0.0.1, port: 8081, groups: ['a.b']}\n", "admin.groups[0]", "not a valid name"},
		{"bool as string", baseServer + "admin: {host: 127.0.0.1, port: 8081, enable: 'yes'}\n", "admin.enable", "true or false"},
		{"mapping expected", "server: 5\n" + baseAdmin, "server", "must be a mapping"},
		{"list expected", doc("proxies: {name: x}"), "proxies", "must be a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectOne(t, c.src, c.path, c.want) })
	}
}

func TestUnknownKeysAreRefusedAtEveryLevel(t *testing.T) {
	mock := "name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200}\n"
	cases := []struct{ name, src, path string }{
		{"root", doc("extra: 1"), "extra"},
		{"server", "server: {host: 127.0.0.1, port: 8080, extra: 1}\n" + baseAdmin, "server.extra"},
		{"admin", baseServer + "admin: {host: 127.0.0.1, port: 8081, extra: 1}\n", "admin.extra"},
		{"admin.auth", baseServer + "admin: {host: 127.0.0.1, port: 8081, auth: {extra: 1}}\n", "admin.auth.extra"},
		{"admin.access", baseServer + "admin: {host: 127.0.0.1, port: 8081, access: {extra: admin}}\n", "admin.access.extra"},
		{"admin.upload", baseServer + "admin: {host: 127.0.0.1, port: 8081, upload: {extra: 1}}\n", "admin.upload.extra"},
		{"admin.tokens[0]", baseServer + "admin: {host: 127.0.0.1, port: 8081, tokens: [{name: ci, group: admin, token: " + strings.Repeat("t", 32) + ", extra: 1}]}\n", "admin.tokens[0].extra"},
		{"logging", doc("logging: {extra: 1}"), "logging.extra"},
		{"control", doc("control: {extra: 1}"), "control.extra"},
		{"templates", doc("templates: {extra: 1}"), "templates.extra"},
		{"sentry", doc("sentry: {dsn: '', extra: 1}"), "sentry.extra"},
		{"proxy", proxyDoc("extra: 1"), "proxies[0].extra"},
		{"resolve", proxyDoc("resolve: {type: default, extra: 1}"), "proxies[0].resolve.extra"},
		{"loss", proxyDoc("loss: {percentage: 0.1, status: 503, extra: 1}"), "proxies[0].loss.extra"},
		{"latency", proxyDoc("latency: {percentage: 0.1, min: 0, max: 1, extra: 1}"), "proxies[0].latency.extra"},
		{"proxy access", proxyDoc("access: {extra: admin}"), "proxies[0].access.extra"},
		{"mock", mockDoc(mock + "extra: 1"), "proxies[0].mocks[0].extra"},
		{"mock request", mockDoc("name: mm\nrequest: {method: GET, url: x, extra: 1}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.extra"},
		{"mock response", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, extra: 1}"), "proxies[0].mocks[0].response.extra"},
		{"mock proxy", mockDoc(mock + "proxy: {extra: 1}"), "proxies[0].mocks[0].proxy.extra"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectOne(t, c.src, c.path, "unknown key `extra`") })
	}
	t.Run("server.workers", func(t *testing.T) {
		expectOne(t, "server: {host: 127.0.0.1, port: 8080, workers: 4}\n"+baseAdmin, "server.workers", "--workers flag")
	})
	for _, action := range []string{"list", "create"} {
		t.Run("proxy access "+action, func(t *testing.T) {
			expectOne(t, proxyDoc("access: {"+action+": admin}"), "proxies[0].access."+action, "cannot be overridden per proxy")
		})
	}
}

func TestRequiredKeys(t *testing.T) {
	tok := strings.Repeat("t", 32)
	cases := []struct{ name, src, path string }{
		{"server", baseAdmin, "server"},
		{"admin", baseServer, "admin"},
		{"server.host", "server: {port: 8080}\n" + baseAdmin, "server.host"},
		{"server.port null", "server: {host: 127.0.0.1, port: ~}\n" + baseAdmin, "server.port"},
		{"admin.port", baseServer + "admin: {host: 127.0.0.1}\n", "admin.port"},
		{"proxy name", doc("proxies: [{type: http, url: 'http://h'}]"), "proxies[0].name"},
		{"proxy type", doc("proxies: [{name: zeta, url: 'http://h'}]"), "proxies[0].type"},
		{"proxy url", doc("proxies: [{name: zeta, type: http}]"), "proxies[0].url"},
		{"loss percentage", proxyDoc("loss: {status: 503}"), "proxies[0].loss.percentage"},
		{"loss status", proxyDoc("loss: {percentage: 0}"), "proxies[0].loss.status"},
		{"latency max", proxyDoc("latency: {percentage: 0, min: 0}"), "proxies[0].latency.max"},
		{"mock request", mockDoc("name: mm\nresponse: {status: 200}"), "proxies[0].mocks[0].request"},
		{"mock method", mockDoc("name: mm\nrequest: {url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.method"},
		{"mock status", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {body: hi}"), "proxies[0].mocks[0].response.status"},
		{"token group", baseServer + "admin: {host: 127.0.0.1, port: 8081, tokens: [{name: ci, token: " + tok + "}]}\n", "admin.tokens[0].group"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectOne(t, c.src, c.path, "is required") })
	}
	// A first document's missing blocks say what to write.
	expectOne(t, baseServer, "admin", "is required: where the admin API and the dashboard listen, for example `admin: {host: 127.0.0.1, port: 8081}`; "+
		"once it serves, `doppel token add --name me --group admin --config <this file>` adds a token")
	expectOne(t, baseAdmin, "server", "is required: where the proxy listens, for example `server: {host: 127.0.0.1, port: 8080}`")
	expectOne(t, baseServer+"admin: {host: 127.0.0.1}\n", "admin.port", "is required: the admin API's port, for example `port: 8081`")
}

func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	src := `server: {host: localhost, port: 0, workers: 2}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: Billing.API
    type: ftp
    url: https://h/?q
    loss: {percentage: 45, status: 503}
`
	vs := violations(t, src)
	want := []string{"server.host", "server.port", "server.workers", "proxies[0].name", "proxies[0].type", "proxies[0].url", "proxies[0].loss.percentage"}
	if len(vs) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(vs), len(want), (&Invalid{vs}).Error())
	}
	for i, v := range vs {
		if v.Path != want[i] {
			t.Errorf("violation %d at %q, want %q", i, v.Path, want[i])
		}
		if v.Line == 0 {
			t.Errorf("violation %q has no line", v)
		}
	}
	if vs[6].Line != 7 {
		t.Errorf("loss.percentage reported on line %d, want 7", vs[6].Line)
	}
}

func TestDocumentShapeErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"empty", "", "the document is empty"},
		{"comment only", "# nothing\n", "the document is empty"},
		{"two documents", doc() + "---\n" + doc(), "several YAML documents"},
		{"syntax", "server: [1\nadmin: 2\n", "YAML syntax error at column"},
		{"a tab", "server:\n\thost: 127.0.0.1\n", "YAML syntax error at column 1: tabs are not allowed for indentation; indent with spaces"},
		{"duplicate key", baseServer + baseAdmin + "logging: {level: info}\nlogging: {level: warn}\n", "mapping key \"logging\" already defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	// A key indented unlike its neighbours: the line to fix, the key, and
	// how it stands against the line above.
	for _, c := range []struct {
		name, src, want string
		line            int
	}{
		{"deeper than its neighbours", "server:\n  host: 127.0.0.1\n   port: 8080\n", "YAML syntax error at column 4: mapping value is not allowed in this context; " +
			"check the indentation of line 3: `port` starts in column 4, deeper than line 2 (column 3), so it reads as more of that line's value; the keys of one mapping start in the same column", 3},
		{"shallower than its neighbours", "server:\n  host: 127.0.0.1\n\n  # the port\n port: 8080\n", "YAML syntax error at column 2: value is not allowed in this context; " +
			"check the indentation of line 5: `port` starts in column 2, and lines up with no key above it (line 2 starts in column 3)", 5},
		{"in a list item", "proxies:\n  - name: a\n     type: http\n", "check the indentation of line 3: `type` starts in column 6, deeper than line 2 (column 5)", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs := violations(t, c.src)
			if len(vs) != 1 || vs[0].Line != c.line || !strings.Contains(vs[0].Message, c.want) {
				t.Fatalf("got %v, want line %d and %q", vs, c.line, c.want)
			}
		})
	}
	t.Run("syntax error carries its line", func(t *testing.T) {
		vs := violations(t, "server: {host: 127.0.0.1, port: 8080}\nadmin: [1\nproxies: 2\n")
		if len(vs) != 1 || vs[0].Line == 0 || !strings.Contains(vs[0].String(), "(line ") {
			t.Fatalf("got %v", vs)
		}
	})
	t.Run("oversized", func(t *testing.T) {
		big := doc("# " + strings.Repeat("x", MaxDocumentSize))
		if _, err := Load([]byte(big)); err == nil || !strings.Contains(err.Error(), "at most") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestDefaults(t *testing.T) {
	d := mustLoad(t, doc("proxies: [{name: zeta, type: http, url: 'https://API.example.com'}]"))
	a := d.Admin
	checks := []struct {
		name string
		ok   bool
	}{
		{"admin.enable true", *a.Enable},
		{"admin.dashboard true", *a.Dashboard},
		{"admin.public false", !*a.Public},
		{"admin.title Doppel", a.Title == "Doppel"},
		{"admin.groups [*]", len(a.Groups) == 1 && a.Groups[0] == AnyGroup},
		{"admin.auth.header", a.Auth.Header == "X-Proxy-Authorization"},
		{"admin.tokens empty", a.Tokens != nil && len(a.Tokens) == 0},
		{"admin.upload.limit 1Mi", a.Upload.Limit == 1<<20},
		{"logging.level info", d.Logging.Level == "info"},
		{"logging.format json", d.Logging.Format == "json"},
		{"control.socket", d.Control.Socket == "/tmp/doppel.sock"},
		{"templates.dir", d.Templates.Dir == "./templates"},
		{"sentry absent", d.Sentry == nil},
	}
	for _, act := range a.Access.Actions() {
		checks = append(checks, struct {
			name string
			ok   bool
		}{"admin.access." + act.Name + " admin", act.Subjects != nil && !act.Subjects.Public && len(act.Subjects.Names) == 1 && act.Subjects.Names[0] == GroupAdmin})
	}
	p := d.Proxies[0]
	checks = append(checks, []struct {
		name string
		ok   bool
	}{
		{"timeout 30", p.Timeout == 30},
		{"body_limit 1Mi", p.BodyLimit == 1<<20},
		{"resolve default", p.Resolve.Type == ResolveDefault},
		{"replace 1.0", *p.Replace == 1},
		{"rewrite_redirects true", *p.RewriteRedirects},
		{"rewrite_urls true", *p.RewriteURLs},
		{"url normalised", p.URL.String() == "https://api.example.com/"},
		{"no loss", p.Loss == nil},
		{"no latency", p.Latency == nil},
	}...)
	for _, c := range checks {
		if !c.ok {
			t.Errorf("default %s does not hold", c.name)
		}
	}
	if empty := mustLoad(t, doc()); empty.Proxies == nil || len(empty.Proxies) != 0 {
		t.Errorf("absent proxies should load as an empty list, got %#v", empty.Proxies)
	}
}

func TestAcceptedSpellings(t *testing.T) {
	sizes := map[string]ByteSize{
		"4096": 4096, "4096B": 4096, "1Ki": 1024, "1KiB": 1024, "1kib": 1024, "1Mi": 1 << 20, "1MiB": 1 << 20,
		"1Gi": 1 << 30, "1kB": 1000, "1KB": 1000, "1mb": 1000000, "1GB": 1000000000, "2 Mi": 2 << 20,
	}
	for spelled, want := range sizes {
		d := mustLoad(t, proxyDoc("body_limit: "+spelled))
		if d.Proxies[0].BodyLimit != want {
			t.Errorf("body_limit %s = %d, want %d", spelled, d.Proxies[0].BodyLimit, want)
		}
	}
	d := mustLoad(t, proxyDoc("replace: 0\nloss: {percentage: 1, status: 503}\nlatency: {percentage: 0.5, min: 0.25, max: 300}\ntimeout: 3600"))
	p := d.Proxies[0]
	if *p.Replace != 0 || p.Loss.Percentage != 1 || p.Latency.Min != 0.25 || p.Latency.Max != 300 || p.Timeout != 3600 {
		t.Errorf("bounds not accepted as written: %+v", p)
	}
	for _, m := range Methods {
		mustLoad(t, mockDoc("name: mm\nrequest: {method: "+m+", url: x}\nresponse: {status: 200}"))
	}
	// Any status Doppel 1.1 loads, 1xx included (what a client gets for a
	// 1xx is an advisory's to say, TestAdvisoriesInformationalStatus).
	for _, st := range []Status{100, 101, 102, 103, 199, 200, 599} {
		d := mustLoad(t, mockDoc(fmt.Sprintf("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: %d}\nproxy: {loss: {percentage: 1, status: %d}}", st, st)))
		if m := d.Proxies[0].Mocks[0]; m.Response.Status != st || m.Proxy.Loss.Status != st {
			t.Errorf("status %d loaded as %d (response) and %d (loss)", st, m.Response.Status, m.Proxy.Loss.Status)
		}
		if d := mustLoad(t, proxyDoc(fmt.Sprintf("loss: {percentage: 1, status: %d}", st))); d.Proxies[0].Loss.Status != st {
			t.Errorf("loss status %d loaded as %d", st, d.Proxies[0].Loss.Status)
		}
	}
	mustLoad(t, "server: {host: '::', port: 8080, external_url: 'https://{{ host }}/base'}\n"+baseAdmin)
	mustLoad(t, doc("proxies: [{name: "+strings.Repeat("a", 32)+", type: http, url: 'http://u:p@h:81/api/v1'}]"))
	mustLoad(t, baseServer+"admin: {host: 127.0.0.1, port: 8081, access: {read: public, list: []}}\n")
}

func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Load(src); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseProxy(t *testing.T) {
	p, err := ParseProxy([]byte("name: zeta\ntype: http\nurl: https://h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Timeout != DefaultTimeout || p.URL.String() != "https://h/" {
		t.Errorf("defaults not filled: %+v", p)
	}
	if _, err := ParseProxy([]byte("name: zeta\ntype: http\nurl: https://h\nextra: 1\n")); err == nil || !strings.Contains(err.Error(), "extra: proxy `zeta`: unknown key") {
		t.Errorf("unknown key accepted: %v", err)
	}
}

func TestAliasesCannotExplode(t *testing.T) {
	var b strings.Builder
	b.WriteString(baseServer + baseAdmin + "proxies:\n  - &p {name: zeta, type: http, url: 'http://h', mocks: &m [")
	for i := range 300 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{name: m%03d, request: {method: GET, url: x}, response: {status: 200}}", i)
	}
	b.WriteString("]}\n")
	for range 2000 {
		b.WriteString("  - {name: zeta, type: http, url: 'http://h', mocks: *m}\n")
	}
	_, err := Load([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "through its aliases") {
		t.Fatalf("a document expanding to millions of values was not refused: %v", err)
	}
	// Ordinary reuse is fine.
	mustLoad(t, doc("proxies:\n  - {name: zeta, type: http, url: 'http://h', headers: &h {X-A: a}}\n  - {name: alpha, type: http, url: 'http://i', headers: *h, resolve: {type: header, header: X-P}}"))
}

func TestURLPasswordsNeverAppearInMessages(t *testing.T) {
	for _, u := range []string{"https://user:hunter2@api.example.com/v1?x=1", "https://user:hunter2@api.example.com/v1#f", "ftp://user:hunter2@h/", "https://user:hunter2@h:99999/"} {
		_, err := Load([]byte(doc("proxies: [{name: zeta, type: http, url: '" + u + "'}]")))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", u, err)
		}
	}
	_, err := Load([]byte("server: {host: 127.0.0.1, port: 8080, external_url: 'https://u:hunter2@h/?q'}\n" + baseAdmin))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("external_url: %v", err)
	}
}
