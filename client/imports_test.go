package client_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyTheStandardLibrary: a program importing the client pulls in no
// dependency of Doppel's; the codes it shares are standard library only.
func TestOnlyTheStandardLibrary(t *testing.T) {
	const codes = "github.com/doppelproxy/doppel/internal/apierr"
	for dir, allowed := range map[string]string{".": codes, "../internal/apierr": ""} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				first, _, _ := strings.Cut(path, "/")
				if strings.Contains(first, ".") && path != allowed {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
