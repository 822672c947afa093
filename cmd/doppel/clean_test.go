package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunningTheExamplesLeavesTheTreeClean runs the README's first command,
// `serve --config examples/main.yaml` from the repository root, stops it
// with Ctrl-C (SIGINT) or SIGTERM, and expects `git status --porcelain` to
// show nothing: whatever serve leaves (the lock file beside the document,
// the template directory) is either already in the tree or ignored. It does
// the same for every other example that serves offline.
//
// The repository here is a fresh one holding the real repository's tracked
// examples/ and .gitignore, so that the test neither depends on nor
// disturbs the work tree it runs in. The binary stands in for `go run`,
// which builds outside the tree. Only where it listens differs from the
// command: ports the system picks, and a control socket outside the tree
// (the default, /tmp/doppel.sock, is outside it too).
func TestRunningTheExamplesLeavesTheTreeClean(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed, and CI is set")
		}
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=doppel test", "-c", "user.email=test@doppel.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(cleanEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	tracked := strings.Split(strings.TrimRight(git(repoPath(t, "."), "ls-files", "-z", "--", "examples", ".gitignore"), "\x00"), "\x00")
	for _, rel := range tracked {
		src, err := os.ReadFile(repoPath(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(repo, "init", "-q")
	git(repo, "add", "-A")
	git(repo, "commit", "-q", "-m", "the examples")

	type run struct {
		example string
		sig     syscall.Signal
	}
	runs := []run{{"main.yaml", syscall.SIGINT}, {"main.yaml", syscall.SIGTERM}}
	for _, name := range offlineExamples(t) {
		if name != "main.yaml" {
			runs = append(runs, run{name, syscall.SIGINT})
		}
	}
	for _, r := range runs {
		s := serveExample(t, repo, r.example, nil)
		// One request each, never to main.yaml's public upstream: the
		// header selects its offline proxy, and means nothing to the others.
		call(t, "GET", s.proxy+"/health", "", "X-Backend", "shop")
		s.p.signal(r.sig)
		if code := s.p.waitExit(exitTimeout); code != wantOK {
			t.Fatalf("%s, stopped with %v: want exit 0:\n%s", r.example, r.sig, s.p)
		}
		if st := git(repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Fatalf("after serving examples/%s and stopping it with %v, git status shows:\n%s", r.example, r.sig, st)
		}
	}
}
