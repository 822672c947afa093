package admin

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzEnvTokens feeds ParseEnvTokens (DOPPEL_ADMIN_TOKENS) anything. It
// must never panic; what it accepts obeys the document's rules for names,
// groups and tokens, with no token twice; and no error it gives repeats a
// token's value.
//
//	go test ./internal/admin -run '^$' -fuzz FuzzEnvTokens -fuzztime 2m
func FuzzEnvTokens(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"ci": {"token": "0f8d3b2a-7c41-4e55-9a1e-6b2d8c4f1a90"}}`,
		`{"ci": {"token": "0f8d3b2a-7c41-4e55-9a1e-6b2d8c4f1a90", "group": "admin"}, "cd": {"token": "0f8d3b2a-7c41-4e55-9a1e-6b2d8c4f1a90"}}`,
		`{"c": {"token": "short"}}`, `{"ci": {"tok": "x"}}`, `[1, 2]`, `{"ci": {"token": 7}}`, `{"ci": null}`,
		`{"ci": {"token": "0f8d3b2a-7c41-4e55-9a1e-6b2d8c4f1a90 with spaces"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tokens, err := ParseEnvTokens(raw)
		if err != nil {
			for _, secret := range tokenValues(raw) {
				if len(secret) >= 4 && strings.Contains(err.Error(), secret) {
					t.Fatalf("the error repeats a token's value: %v", err)
				}
			}
			return
		}
		seen := map[string]bool{}
		for _, tk := range tokens {
			if n := len(tk.Value); n < 32 || n > 255 || seen[string(tk.Value)] || tk.Name == "" || tk.Group == "" {
				t.Fatalf("accepted %+v", tk)
			}
			seen[string(tk.Value)] = true
		}
	})
}

// tokenValues are the "token" strings of raw, when it is JSON of that shape.
func tokenValues(raw string) []string {
	var entries map[string]map[string]any
	if json.Unmarshal([]byte(raw), &entries) != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if v, ok := e["token"].(string); ok {
			out = append(out, v)
		}
	}
	return out
}
