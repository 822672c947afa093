package main

import (
	"os"
	"path/filepath"
	"strings"
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
