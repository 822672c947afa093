package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCommandsCallTheAdminAPIThroughTheClient: no command but serve (the
// server itself) names a path of the admin API. They call it through
// client/, whose operations a test holds to /openapi.json, so that the
// command line and the public client cannot drift.
func TestCommandsCallTheAdminAPIThroughTheClient(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	server := map[string]bool{"serve.go": true}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || server[f] {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "/api/v1") {
				t.Errorf("%s:%d names an admin API path; call it through client/ instead: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestJSONIsTheAnswerAsItCame: -o json prints the admin API's answer byte
// for byte, its spacing and the fields the client does not know
// included; the token travels in --auth-header; an answer that is not
// the API's says what it should have been.
func TestJSONIsTheAnswerAsItCame(t *testing.T) {
	t.Parallel()
	const sessions = "{ \"sessions\" : [ {\"id\": \"zeta\", \"ttl\": 60, \"proxies\": [\"shop\"], \"expires_at\": \"2026-01-02T03:04:05.5Z\", \"later\": {}} ] }\n"
	var gate atomic.Value // the token's header as the server got it
	gate.Store("")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate.Store(r.Header.Get("X-Gate"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, sessions)
	}))
	defer api.Close()
	r := doppel(t, invocation{args: []string{"sessions", "list", "--admin", api.URL, "--token", "t0k", "--auth-header", "X-Gate", "-o", "json"}})
	if header := gate.Load().(string); r.code != wantOK || r.stdout != sessions || header != "Bearer t0k" {
		t.Errorf("%s\nthe token's header: %q", r, header)
	}
	if r := doppel(t, invocation{args: []string{"sessions", "list", "--admin", api.URL}}); r.code != wantOK ||
		r.stdout != "ID    PROXIES  EXPIRES                 TTL\nzeta  shop     2026-01-02T03:04:05.5Z  60s\n" {
		t.Errorf("the table: %s", r)
	}

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") }))
	defer other.Close()
	if r := doppel(t, invocation{args: []string{"sessions", "list", "--admin", other.URL}}); r.code != wantRejected ||
		!strings.HasPrefix(r.stderr, "doppel: the admin API's answer is not a list of sessions: invalid character 'h'") {
		t.Errorf("not the API: %s", r)
	}
}
