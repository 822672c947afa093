package config

import (
	"errors"
	"strings"
	"testing"
)

func TestValidSessionID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "Yq3v0c0bQvS9k5Zr3m0xkA": true, "ci-run_42": true, strings.Repeat("z", 64): true,
		"": false, strings.Repeat("z", 65): false, "a b": false, "a/b": false, "é": false, "a.b": false, "a\x00": false,
	} {
		if got := ValidSessionID(id); got != want {
			t.Errorf("ValidSessionID(%q) = %v", id, got)
		}
	}
}

// TestASessionIsCheckedWhole: a refused value, a rule broken beside it, an
// unknown proxy and what is wrong in that proxy's overlay come in one
// answer, each with its path, as a document's do.
func TestASessionIsCheckedWhole(t *testing.T) {
	doc := mustLoad(t, proxyDoc(""))
	body := `{"proxies": {
  "zeta": {"loss": {"percentage": 45, "status": 503}, "latency": {"percentage": 1, "min": 2, "max": 1},
           "mocks": [{"name": "aa", "request": {"method": "GET", "url": "^/a$"}, "response": {"status": 200}},
                     {"name": "aa", "request": {"method": "GET", "url": "^/b$"}, "response": {"status": 200}}]},
  "nowhere": {"latency": {"percentage": 1, "min": 3, "max": 1}}
}}`
	_, err := ParseSession([]byte(body), doc)
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("ParseSession: %v, want *Invalid", err)
	}
	got := strings.Join(inv.Lines(), "\n")
	for _, want := range []string{
		"proxies.zeta.loss.percentage:",
		"proxies.zeta.latency.min: min must be <= max",
		"proxies.zeta.mocks[1].name: duplicate mock name",
		"proxies.nowhere: no proxy is named `nowhere`",
		"proxies.nowhere.latency.min: min must be <= max",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the answer lacks %q:\n%s", want, got)
		}
	}
	if n := len(inv.Violations); n != 5 {
		t.Errorf("%d violations, want 5:\n%s", n, got)
	}
}
