package doppeltest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheGoDocsWorkFromAClone: docs/go.md's "From a clone" is run as
// written, offline: its commands in a new module beside the repository
// (linked in as ../doppel), with its test, which must pass; then its
// go install in the clone, whose binary must run.
func TestTheGoDocsWorkFromAClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a module of its own")
	}
	doc, err := os.ReadFile("../docs/go.md")
	if err != nil {
		t.Fatal(err)
	}
	section := between(string(doc), "\n## From a clone\n", "\n## ")
	commands := between(section, "```sh\n", "```\n")
	test := between(section, "```go\n", "```\n")
	const install = "go install ./cmd/doppel"
	if commands == "" || test == "" || !strings.Contains(section, "`"+install+"`, run\nin `../doppel`") {
		t.Fatalf("docs/go.md lacks its commands, its test or the install from a clone:\n%s", section)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clone, app := filepath.Join(dir, "doppel"), filepath.Join(dir, "myapp")
	if err := os.Symlink(root, clone); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "cart_test.go"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	// No proxy and no workspace: the clone and the module cache only.
	env := append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOBIN="+filepath.Join(dir, "bin"))
	run := func(where, line string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = where, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s (in %s): %v\n%s", line, where, err, out)
		}
		return string(out)
	}
	var last string
	for _, line := range strings.Split(strings.TrimSpace(commands), "\n") {
		last = run(app, line)
	}
	if !strings.HasPrefix(last, "ok  \texample.com/myapp") {
		t.Errorf("the last command did not pass the test: %s", last)
	}
	run(clone, install)
	if out := run(dir, filepath.Join(dir, "bin", "doppel")+" version"); !strings.HasPrefix(out, "doppel ") {
		t.Errorf("the installed binary says %q", out)
	}
}
