// Package storetest is the conformance suite every store must pass: the
// exit criterion for a store implementation. A store's own tests call Run
// with a function that opens a fresh store holding a given document.
package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
)

// Open returns a fresh store whose configuration is the document src.
// Its template files are under TemplatesDir().
type Open func(t *testing.T, src []byte) store.Store

// templatesDir is the directory a store keeps its template files under.
func templatesDir(t *testing.T, s store.Store) string {
	t.Helper()
	d, ok := s.(interface{ TemplatesDir() string })
	if !ok || d.TemplatesDir() == "" {
		t.Fatalf("%T keeps no template directory", s)
	}
	return d.TemplatesDir()
}

// litter puts in dir what no store wrote: a dot file, a name that is not
// UTF-8, a directory.
func litter(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".DS_Store", "\xff\xfe.j2", filepath.Join("sub", "x")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Tree lists every path under dir, relative to it, sorted; a missing dir
// is none. The binary's tests read template directories with it too.
func Tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// Initial is the document every case starts from.
const Initial = `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: zeta
    type: http
    url: https://api.example.com/v1
    mocks:
      - name: from-file
        request: {method: GET, url: "^/f$"}
        response: {status: 200, template: answer.json.j2}
  - name: alpha
    type: http
    url: http://127.0.0.1:9000
    resolve: {type: header, header: X-Backend}
`

// Run runs the whole suite.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	load := func(t *testing.T, s store.Store) *store.Snapshot {
		t.Helper()
		snap, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return snap
	}

	t.Run("load gives the document and its revision", func(t *testing.T) {
		s := open(t, []byte(Initial))
		snap := load(t, s)
		want, _ := config.Load([]byte(Initial))
		rev, _ := config.DocumentRevision(want)
		if snap.Revision != rev || len(snap.Document.Proxies) != 2 || snap.Document.Proxies[0].Name != "zeta" {
			t.Fatalf("revision %s (want %s), %d proxies", snap.Revision, rev, len(snap.Document.Proxies))
		}
	})

	t.Run("save with the current revision", func(t *testing.T) {
		s := open(t, []byte(Initial))
		snap := load(t, s)
		snap.Document.Proxies[1].Timeout = 7
		rev, err := s.Save(ctx, snap.Document, snap.Revision)
		if err != nil {
			t.Fatal(err)
		}
		again := load(t, s)
		if again.Revision != rev || rev == snap.Revision || again.Document.Proxies[1].Timeout != 7 {
			t.Fatalf("saved %s, loaded %s with timeout %d", rev, again.Revision, again.Document.Proxies[1].Timeout)
		}
	})

	t.Run("save with a stale revision writes nothing", func(t *testing.T) {
		s := open(t, []byte(Initial))
		snap := load(t, s)
		stale := snap.Revision
		snap.Document.Proxies[0].Timeout = 9
		if _, err := s.Save(ctx, snap.Document, stale); err != nil {
			t.Fatal(err)
		}
		snap.Document.Proxies[0].Timeout = 11
		if _, err := s.Save(ctx, snap.Document, stale); !errors.Is(err, store.ErrRevisionMismatch) {
			t.Fatalf("a stale save gave %v, want ErrRevisionMismatch", err)
		}
		if got := load(t, s).Document.Proxies[0].Timeout; got != 9 {
			t.Fatalf("a refused save changed the store: timeout %d", got)
		}
	})

	t.Run("concurrent saves from one revision: exactly one wins", func(t *testing.T) {
		s := open(t, []byte(Initial))
		base := load(t, s)
		const n = 10
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				doc, _ := config.Load([]byte(Initial))
				doc.Proxies[0].Timeout = config.Timeout(100 + i)
				_, errs[i] = s.Save(ctx, doc, base.Revision)
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrRevisionMismatch):
				t.Fatalf("unexpected error: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d saves won, want exactly 1", won)
		}
	})

	t.Run("what is saved loads to the same revision", func(t *testing.T) {
		s := open(t, []byte(Initial))
		snap := load(t, s)
		rev, err := s.Save(ctx, snap.Document, snap.Revision)
		if err != nil || rev != snap.Revision || load(t, s).Revision != rev {
			t.Fatalf("an unchanged document saved as %s (%v), was %s", rev, err, snap.Revision)
		}
	})

	t.Run("an invalid stored document is reported with its violations", func(t *testing.T) {
		s := open(t, []byte("server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8080}\n"))
		_, err := s.Load(ctx)
		var inv *config.Invalid
		if !errors.As(err, &inv) || inv.Violations[0].Path != "admin.port" {
			t.Fatalf("got %v, want the V1 violation", err)
		}
	})

	t.Run("template files", func(t *testing.T) {
		s := open(t, []byte(Initial))
		if list, err := s.Templates(ctx, "zeta"); err != nil || len(list) != 0 || list == nil {
			t.Fatalf("an empty list: %v %v", list, err)
		}
		if err := s.WriteTemplate(ctx, "zeta", "answer.json.j2", []byte(`{"v": 1}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteTemplate(ctx, "zeta", "answer.json.j2", []byte(`{"v": 22}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteTemplate(ctx, "zeta", "b.txt", []byte("b")); err != nil {
			t.Fatal(err)
		}
		list, _ := s.Templates(ctx, "zeta")
		if len(list) != 2 || list[0] != (store.TemplateFile{Name: "answer.json.j2", Size: 9}) || list[1].Name != "b.txt" {
			t.Fatalf("list %v", list)
		}
		if b, err := s.ReadTemplate(ctx, "zeta", "answer.json.j2"); err != nil || string(b) != `{"v": 22}` {
			t.Fatalf("read %q %v", b, err)
		}
		if _, err := s.ReadTemplate(ctx, "zeta", "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("reading a missing file: %v", err)
		}
		for _, bad := range []string{"../x", ".hidden", "a/b"} {
			if err := s.WriteTemplate(ctx, "zeta", bad, []byte("x")); err == nil {
				t.Errorf("an unsafe name %q was written", bad)
			}
		}
		if err := s.DeleteTemplate(ctx, "zeta", "b.txt"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTemplate(ctx, "zeta", "b.txt"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleting a missing file: %v", err)
		}
		if err := s.MoveTemplates(ctx, "zeta", "omega"); err != nil {
			t.Fatal(err)
		}
		if list, _ := s.Templates(ctx, "zeta"); len(list) != 0 {
			t.Fatalf("files stayed after a move: %v", list)
		}
		if b, err := s.ReadTemplate(ctx, "omega", "answer.json.j2"); err != nil || string(b) != `{"v": 22}` {
			t.Fatalf("moved file: %q %v", b, err)
		}
		if err := s.DeleteTemplates(ctx, "omega"); err != nil {
			t.Fatal(err)
		}
		if list, _ := s.Templates(ctx, "omega"); len(list) != 0 {
			t.Fatalf("files stayed after deleting all: %v", list)
		}
	})

	t.Run("keeping template files removes what no name keeps, whatever it is", func(t *testing.T) {
		s := open(t, []byte(Initial))
		dir := filepath.Join(templatesDir(t, s), "zeta")
		for _, name := range []string{"answer.json.j2", "old.j2"} {
			if err := s.WriteTemplate(ctx, "zeta", name, []byte(name)); err != nil {
				t.Fatal(err)
			}
		}
		litter(t, dir)
		if err := s.KeepTemplates(ctx, "zeta", func(name string) bool { return name == "answer.json.j2" }); err != nil {
			t.Fatal(err)
		}
		if got := Tree(t, dir); !slices.Equal(got, []string{"answer.json.j2"}) {
			t.Fatalf("the directory holds %q, want only answer.json.j2", got)
		}
		if list, _ := s.Templates(ctx, "zeta"); len(list) != 1 || list[0].Name != "answer.json.j2" {
			t.Fatalf("list %v", list)
		}
		litter(t, dir)
		if err := s.KeepTemplates(ctx, "zeta", func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the directory of a proxy left with no file stayed: %v %q", err, Tree(t, dir))
		}
		if list, _ := s.Templates(ctx, "zeta"); len(list) != 0 {
			t.Fatalf("list %v", list)
		}
		if err := s.KeepTemplates(ctx, "alpha", func(string) bool { return true }); err != nil {
			t.Fatalf("a proxy with no directory: %v", err)
		}
	})

	t.Run("materializing makes the directory what the store holds", func(t *testing.T) {
		s := open(t, []byte(Initial))
		m, ok := s.(store.Materializer)
		if !ok {
			t.Skipf("%T keeps its template files in the directory itself", s)
		}
		root := templatesDir(t, s)
		if err := s.WriteTemplate(ctx, "zeta", "answer.json.j2", []byte("a")); err != nil {
			t.Fatal(err)
		}
		litter(t, filepath.Join(root, "zeta"))
		litter(t, filepath.Join(root, "ghost"))
		if err := os.WriteFile(filepath.Join(root, "loose.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(root, "zeta", "answer.json.j2")); err != nil {
			t.Fatal(err)
		}
		if err := m.Materialize(ctx); err != nil {
			t.Fatal(err)
		}
		if got := Tree(t, root); !slices.Equal(got, []string{"zeta", filepath.Join("zeta", "answer.json.j2")}) {
			t.Fatalf("the directory holds %q, want only zeta/answer.json.j2", got)
		}
	})
}
