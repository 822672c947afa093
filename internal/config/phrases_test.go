package config

import (
	"strings"
	"testing"
)

// TestMessagesCarryTheReference: each refusal Doppel 1.1 gives a document
// is ours too, at the same path, and its message contains the phrase 1.1
// says it with (SPEC §19.2), so a script or a reader that knows 1.1's
// wording finds it. What follows the phrase is ours.
func TestMessagesCarryTheReference(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	mock := func(body string) string { return mockDoc("name: mm\n" + body) }
	admin := func(extra string) string {
		return baseServer + "admin: {host: 127.0.0.1, port: 8081, " + extra + "}\n"
	}
	cases := []struct {
		name, src, path string
		phrases         []string
	}{
		// Upstream URLs.
		{"relative url", doc("proxies: [{name: zeta, type: http, url: '/api'}]"), "proxies[0].url", []string{"must be absolute"}},
		{"url scheme", doc("proxies: [{name: zeta, type: http, url: 'ftp://h/'}]"), "proxies[0].url", []string{"http or https"}},
		{"url query", doc("proxies: [{name: zeta, type: http, url: 'https://h/?a=1'}]"), "proxies[0].url", []string{"query string or fragment"}},
		{"url fragment", doc("proxies: [{name: zeta, type: http, url: 'https://h/#x'}]"), "proxies[0].url", []string{"query string or fragment"}},
		// Ratios.
		{"percent for a fraction", proxyDoc("loss: {percentage: 50, status: 503}"), "proxies[0].loss.percentage", []string{"between 0.0 and 1.0", "50% is `0.5`"}},
		{"negative ratio", proxyDoc("replace: -0.1"), "proxies[0].replace", []string{"between 0.0 and 1.0"}},
		// Names.
		{"short name", doc("proxies: [{name: a, type: http, url: 'http://h'}]"), "proxies[0].name", []string{"at least 2", "is 1"}},
		{"long proxy name", doc("proxies: [{name: " + long(33) + ", type: http, url: 'http://h'}]"), "proxies[0].name", []string{"at most 32"}},
		{"long mock name", mockDoc("name: " + long(65) + "\nrequest: {method: GET, url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].name", []string{"at most 64", "65"}},
		{"dotted name", doc("proxies: [{name: Billing.API, type: http, url: 'http://h'}]"), "proxies[0].name", []string{"no longer", "-", "_"}},
		{"slash in a name", doc("proxies: [{name: a/b, type: http, url: 'http://h'}]"), "proxies[0].name", []string{"/"}},
		// Patterns and selectors.
		{"bad regex", mockDoc("name: mm\nrequest: {method: GET, url: '/api/(unclosed/'}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.url", []string{"not a valid regex", "/api/(unclosed/"}},
		{"selector without dot", mockDoc("name: mm\nrequest: {method: GET, url: x, query: {p: page}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.query.p", []string{"must start with `.`"}},
		// Seconds.
		{"negative latency", proxyDoc("latency: {percentage: 1, min: -1, max: 1}"), "proxies[0].latency.min", []string{"must not be negative"}},
		{"latency in ms", proxyDoc("latency: {percentage: 1, min: 0, max: 500}"), "proxies[0].latency.max", []string{"milliseconds"}},
		{"timeout 0", proxyDoc("timeout: 0"), "proxies[0].timeout", []string{"would mean no timeout at all", "leave `timeout` out"}},
		{"timeout over the maximum", proxyDoc("timeout: 3601"), "proxies[0].timeout", []string{"seconds, not milliseconds"}},
		{"negative timeout", proxyDoc("timeout: -1"), "proxies[0].timeout", []string{"must not be negative"}},
		// Sizes.
		{"size 0", proxyDoc("body_limit: 0"), "proxies[0].body_limit", []string{"would reject everything"}},
		{"negative size", proxyDoc("body_limit: -1"), "proxies[0].body_limit", []string{"must not be negative"}},
		{"ambiguous unit", proxyDoc("body_limit: 1M"), "proxies[0].body_limit", []string{"1Mi", "1MB"}},
		{"size overflow", proxyDoc("body_limit: 99999999999999999999Ki"), "proxies[0].body_limit", []string{"overflow"}},
		// Headers.
		{"header name space", proxyDoc("headers: {'X Request ID': a}"), "proxies[0].headers.X Request ID", []string{"not a valid header name", "' '"}},
		{"header value line break", proxyDoc("headers: {X-A: \"a\\nb\"}"), "proxies[0].headers.X-A", []string{"line break", "read as headers"}},
		{"mock header name", mockDoc("name: mm\nrequest: {method: GET, url: x, headers: {who: 'X User'}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.headers.who", []string{"not a valid header name"}},
		// Ports and statuses.
		{"port 0", "server: {host: 127.0.0.1, port: 0}\n" + baseAdmin, "server.port", []string{"any free port"}},
		{"port too big", "server: {host: 127.0.0.1, port: 65536}\n" + baseAdmin, "server.port", []string{"1 to 65535"}},
		{"negative port", "server: {host: 127.0.0.1, port: -1}\n" + baseAdmin, "server.port", []string{"1 to 65535"}},
		{"status 99", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 99}"), "proxies[0].mocks[0].response.status", []string{"100 to 599"}},
		{"huge status", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 70000}"), "proxies[0].mocks[0].response.status", []string{"100 to 599"}},
		{"negative status", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: -1}"), "proxies[0].mocks[0].response.status", []string{"100 to 599"}},
		// Methods.
		{"lower-case method", mockDoc("name: mm\nrequest: {method: get, url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.method", []string{"case-sensitive", "use `GET`"}},
		{"unknown method", mockDoc("name: mm\nrequest: {method: FETCH, url: x}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.method", []string{"not a method Doppel knows", "typo guard", "add it"}},
		// Template file names.
		{"hidden template", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: .env}"), "proxies[0].mocks[0].response.template", []string{"must not start with a dot"}},
		{"template separator", mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: a/b}"), "proxies[0].mocks[0].response.template", []string{"path separator"}},
		// Tokens.
		{"short token", admin("tokens: [{name: ci, group: admin, token: hunter2}]"), "admin.tokens[0].token", []string{"at least 32"}},
		// Unknown keys and types.
		{"misspelt key", proxyDoc("wrokers: 2"), "proxies[0].wrokers", []string{"wrokers"}},
		{"unknown proxy type", doc("proxies: [{name: zeta, type: grpc, url: 'http://h'}]"), "proxies[0].type", []string{"grpc", "http"}},

		// Rules across fields.
		{"ports differ", "server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8080}\n", "admin.port", []string{"must differ"}},
		{"duplicate proxy", doc("proxies:\n  - {name: p1, type: http, url: 'http://h', resolve: {type: header, header: X-P}}\n  - {name: p1, type: http, url: 'http://i'}"), "proxies[1].name", []string{"duplicate proxy name `p1`"}},
		{"two defaults", doc("proxies:\n  - {name: zeta, type: http, url: 'http://h'}\n  - {name: alpha, type: http, url: 'http://i'}"), "proxies[1].resolve", []string{"only one proxy may use `type: default`"}},
		{"header resolve without header", proxyDoc("resolve: {type: header}"), "proxies[0].resolve.header", []string{"required when `type: header`"}},
		{"min above max", proxyDoc("latency: {percentage: 0.5, min: 0.9, max: 0.1}"), "proxies[0].latency.min", []string{"min must be <= max"}},
		{"mock min above max", mock("request: {method: GET, url: x}\nresponse: {status: 200}\nproxy: {latency: {percentage: 1, min: 2, max: 1}}"), "proxies[0].mocks[0].proxy.latency.min", []string{"min must be <= max"}},
		{"duplicate mock", proxyDoc("mocks:\n  - {name: m1, request: {method: GET, url: x}, response: {status: 200}}\n  - {name: m1, request: {method: GET, url: y}, response: {status: 200}}"), "proxies[0].mocks[1].name", []string{"duplicate mock name `m1`"}},
		{"header variable and capture", mock("request: {method: GET, url: '(?P<id>[0-9]+)', headers: {id: X-Id}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.headers.id", []string{"collides with a capture group"}},
		{"query variable and capture", mock("request: {method: GET, url: '(?P<id>[0-9]+)', query: {id: .id}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.query.id", []string{"collides with a capture group"}},
		{"body variable and capture", mock("request: {method: POST, url: '(?P<id>[0-9]+)', body: {id: .id}}\nresponse: {status: 200}"), "proxies[0].mocks[0].request.body.id", []string{"collides with a capture group"}},
		{"two body sources", mock("request: {method: GET, url: x}\nresponse: {status: 200, body: a, json: '{}'}"), "proxies[0].mocks[0].response", []string{"at most one of `body`, `json`, `template`"}},
		{"json does not parse", mock("request: {method: GET, url: x}\nresponse: {status: 200, json: '{{ id '}"), "proxies[0].mocks[0].response.json", []string{"is not a valid template"}},
		{"header does not parse", mock("request: {method: GET, url: x}\nresponse: {status: 200, headers: {X-Id: '{% if %}'}}"), "proxies[0].mocks[0].response.headers.X-Id", []string{"is not a valid template"}},
		{"204 with a body", mock("request: {method: GET, url: x}\nresponse: {status: 204, body: gone}"), "proxies[0].mocks[0].response", []string{"status 204 forbids a body"}},
		{"duplicate token name", admin("tokens: [{name: ci, group: admin, token: " + tokenA + "}, {name: ci, group: admin, token: " + tokenB + "}]"), "admin.tokens[1].name", []string{"duplicate"}},
		{"duplicate token value", admin("tokens: [{name: ci, group: admin, token: " + tokenA + "}, {name: cd, group: admin, token: " + tokenA + "}]"), "admin.tokens[1].token", []string{"duplicate"}},
		{"unknown subject", admin("access: {read: ghost}"), "admin.access.read", []string{"unknown token or group `ghost`"}},
		{"unknown subject per proxy", proxyDoc("access: {read: ghost}"), "proxies[0].access.read", []string{"unknown token or group `ghost`"}},
		{"custom group without a token", admin("access: {read: reviewers}"), "admin.access.read", []string{"unknown token or group `reviewers`"}},
		{"not an allowed group", admin("groups: [admin, ci], tokens: [{name: bot, group: ci, token: " + tokenA + "}], access: {read: [ci, user]}"), "admin.access.read", []string{"`user` is not an allowed group", "may name only `admin`, `ci`, `public`"}},
		{"public write", admin("access: {update: public}"), "admin.access.update", []string{"must not be public"}},
		{"public write per proxy", proxyDoc("access: {upload: public}"), "proxies[0].access.upload", []string{"must not be public"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := violations(t, c.src)
			for _, v := range vs {
				if v.Path != c.path {
					continue
				}
				missing := false
				for _, p := range c.phrases {
					if !strings.Contains(v.Message, p) {
						missing = true
					}
				}
				if !missing {
					return
				}
			}
			t.Fatalf("want a violation at %s containing %q, got:\n%s", c.path, c.phrases, (&Invalid{vs}).Error())
		})
	}
}
