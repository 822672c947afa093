package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestEveryProblemAtOnce: value errors and the rules on what parsed are
// listed together; a rule that rests on a field that failed is not
// reported (nothing twice, nothing against a value the user did not write).
func TestEveryProblemAtOnce(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string // path: the start of the message
		not       []string // paths that must not be reported
	}{
		{"a bad share and min > max", `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: http://h
    loss: {percentage: 50, status: 503}
    latency: {percentage: 0.5, min: 2, max: 1}
`, []string{"proxies[0].loss.percentage: proxy `zeta`: 50 is not between 0.0 and 1.0", "proxies[0].latency.min: proxy `zeta`: min must be <= max: min is 2 s, max is 1 s"}, nil},
		{"a bad host and a port clash", `server: {host: localhost, port: 8080}
admin: {host: 127.0.0.1, port: 8080}
`, []string{"server.host: `localhost` is not an IP address", "admin.port: must differ from server.port"}, nil},
		{"a bad name is not also a duplicate", `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - {name: "a b", type: http, url: http://h, resolve: {type: header, header: X-B}}
  - {name: zeta, type: http, url: http://h}
  - {name: "c d", type: http, url: http://h, resolve: {type: header, header: X-B}}
  - {name: alpha, type: http, url: http://h, latency: {percentage: 1, min: 3, max: 1}}
`, []string{"proxies[0].name: `a b` is not", "proxies[2].name: `c d` is not", "proxies[3].latency.min: proxy `alpha`: min must be <= max"}, []string{"proxies[2].name: duplicate"}},
		{"a bad token does not make access lists wrong", `server: {host: 127.0.0.1, port: 8080}
admin:
  host: 127.0.0.1
  port: 8081
  tokens: [{name: "c i", group: admin, token: 0f8d3b2a-7c41-4e55-9a1e-6b2d8c4f1a90}]
  access: {read: [ci]}
`, []string{"admin.tokens[0].name:"}, []string{"admin.access.read"}},
		{"a failed request field does not make its template's variables unbound", `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: http://h
    mocks:
      - name: mm
        request: {method: GET, url: "^/x$", headers: {tok: "bad header!"}}
        response: {status: 200, body: "{{ tok }}"}
`, []string{"proxies[0].mocks[0].request.headers.tok:"}, []string{"proxies[0].mocks[0].response.body"}},
	} {
		_, err := Load([]byte(c.src))
		var inv *Invalid
		if !errors.As(err, &inv) {
			t.Fatalf("%s: %v", c.name, err)
		}
		lines := inv.Lines()
		for _, w := range c.want {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
				t.Errorf("%s: no %q in\n%s", c.name, w, strings.Join(lines, "\n"))
			}
		}
		for _, n := range c.not {
			if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, n) }) {
				t.Errorf("%s: %q is reported:\n%s", c.name, n, strings.Join(lines, "\n"))
			}
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if seen[l] {
				t.Errorf("%s: reported twice: %s", c.name, l)
			}
			seen[l] = true
		}
	}
}
