package admin

import (
	"os"
	"strings"
	"testing"
)

// TestBodiesNestedTooDeep: a create or update body nested deeper than
// config.MaxNesting is refused with 400 CONFIG_INVALID naming the bound,
// before encoding/json reads it (a JSON list there would otherwise be
// refused as "not a JSON object"), and nothing is written.
func TestBodiesNestedTooDeep(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	before, err := os.ReadFile(e.path)
	if err != nil {
		t.Fatal(err)
	}
	headers := func(n int) string {
		return strings.Repeat(`{"a": `, n) + `"v"` + strings.Repeat("}", n)
	}
	proxy := func(n int) string {
		return `{"name": "deep", "type": "http", "url": "http://h", "headers": ` + headers(n) + `}`
	}
	const bound = "nested deeper than 64 levels, the bound on a document's nesting"
	for _, c := range []struct {
		name, method, path, body string
	}{
		{"a bare proxy", "POST", "/api/v1/proxies", proxy(64)},
		{"a wrapped proxy", "POST", "/api/v1/proxies", `{"proxy": ` + proxy(63) + `}`},
		{"a list", "POST", "/api/v1/proxies", strings.Repeat("[", 65) + strings.Repeat("]", 65)},
		{"deeper than encoding/json's own bound", "POST", "/api/v1/proxies", strings.Repeat("[", 20000) + strings.Repeat("]", 20000)},
		{"block YAML", "POST", "/api/v1/proxies", "a:\n" + strings.Repeat("  - ", 65) + "x\n"},
		{"an update", "PUT", "/api/v1/proxies/zeta", `{"revision": "0000000000000000", "proxy": ` + proxy(63) + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := e.call(t, c.method, c.path, adminToken, c.body)
			expectCode(t, a, 400, "CONFIG_INVALID")
			if msg, _ := a.body["message"].(string); !strings.Contains(msg, bound) {
				t.Errorf("message %q does not name the bound", msg)
			}
		})
	}
	// At the bound, the body is read: refused for what it says.
	a := e.call(t, "POST", "/api/v1/proxies", adminToken, proxy(63))
	expectCode(t, a, 400, "CONFIG_INVALID")
	if msg, _ := a.body["message"].(string); strings.Contains(msg, "nested deeper") {
		t.Errorf("64 levels refused for nesting: %s", msg)
	}
	if after, _ := os.ReadFile(e.path); string(after) != string(before) {
		t.Errorf("a refused body changed the stored document")
	}
}
