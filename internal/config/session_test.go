package config

import (
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
