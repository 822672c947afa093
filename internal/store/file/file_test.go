package file

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/storetest"
)

func open(t *testing.T, src []byte) store.Store {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(path, src, 0o640); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }
func TestConcurrency(t *testing.T) { storetest.Contention(t, open) }

func TestStrayTemporaryFilesAreRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "main.yaml")
	_ = os.WriteFile(path, []byte(storetest.Initial), 0o644)
	stray := filepath.Join(dir, ".main.yaml.tmp-123")
	_ = os.WriteFile(stray, []byte("half"), 0o644)
	other := filepath.Join(dir, "keep.yaml")
	_ = os.WriteFile(other, []byte("x"), 0o644)
	if _, err := Open(path, filepath.Join(dir, "t")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("a temporary file left by a crash survived")
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("a file that is not ours was removed")
	}
}

func TestSaveKeepsTheFileModeAndLeavesNoTemporaryFile(t *testing.T) {
	s := open(t, []byte(storetest.Initial)).(*Store)
	snap, _ := s.Load(context.Background())
	snap.Document.Proxies[0].Timeout = 5
	if _, err := s.Save(context.Background(), snap.Document, snap.Revision); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(s.Path())
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(s.Path()))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("a temporary file remained: %s", e.Name())
		}
	}
	b, _ := os.ReadFile(s.Path())
	if !strings.Contains(string(b), "timeout: 5") {
		t.Fatalf("the saved document:\n%s", b)
	}
}

// TestSingleFileMountIsRefusedClearly: a document bind-mounted as a single
// file (a container's usual mistake) cannot be replaced by rename; the
// error says to mount the directory.
func TestSingleFileMountIsRefusedClearly(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "outside.yaml")
	path := filepath.Join(dir, "main.yaml")
	_ = os.WriteFile(src, []byte(storetest.Initial), 0o644)
	_ = os.WriteFile(path, []byte("placeholder"), 0o644)
	if out, err := exec.Command("mount", "--bind", src, path).CombinedOutput(); err != nil {
		t.Skipf("bind mounts are not permitted here (%v: %s); the rename error is still translated", err, out)
	}
	defer exec.Command("umount", path).Run()
	s, err := Open(path, filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Save(context.Background(), snap.Document, snap.Revision)
	if err == nil || !strings.Contains(err.Error(), "mount the directory") {
		t.Fatalf("got %v", err)
	}
}
