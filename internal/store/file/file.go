// Package file is the store that keeps the configuration in one YAML file
// and template files under templates.dir.
//
// A write goes to a temporary file in the same directory, then replaces
// the document with rename, so a reader sees the old document or the new
// one, never half of either. Writers, in this process or another, are
// serialised by an advisory lock (flock) on a sibling <config>.lock, made
// by the first write. A temporary file a crash left behind is removed the
// next time the store is opened.
package file

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
)

// Store is a file store.
type Store struct {
	path      string // the document
	templates string // templates.dir

	// known is the revision of the document bytes last read or written:
	// a compare-and-swap reads the file again under the lock, and needs
	// not parse it again when it is what this store last saw.
	mu    sync.Mutex
	known struct {
		sum [sha256.Size]byte
		rev config.Revision
	}
}

func (s *Store) remember(src []byte, rev config.Revision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known.sum, s.known.rev = sha256.Sum256(src), rev
}

func (s *Store) recall(src []byte) (config.Revision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known.rev, s.known.rev != "" && s.known.sum == sha256.Sum256(src)
}

var _ store.Store = (*Store)(nil)

// Open opens the store of the document at path, whose template files live
// under templates, and removes temporary files a crash left behind. It
// creates nothing: the lock file is made by the first write, so a store
// in a directory Doppel cannot write serves, and a start that fails
// leaves nothing behind.
func Open(path, templates string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s := &Store{path: abs, templates: templates}
	stray, _ := filepath.Glob(filepath.Join(filepath.Dir(abs), tempPrefix(abs)+"*"))
	if len(stray) == 0 {
		return s, nil
	}
	// Under the lock, so that no writer's file in the making is taken.
	unlock, err := s.lock()
	if err != nil {
		return s, nil // nothing can be written here either; the strays are harmless
	}
	defer unlock()
	for _, f := range stray {
		_ = os.Remove(f)
	}
	return s, nil
}

// Path is the document's path.
func (s *Store) Path() string { return s.path }

// TemplatesDir is the directory template files live under.
func (s *Store) TemplatesDir() string { return s.templates }

func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// lock takes the advisory lock that serialises writers, making the lock
// file the first time.
func (s *Store) lock() (func(), error) {
	f, err := os.OpenFile(s.path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return nil, fmt.Errorf("the configuration is read-only here: %s cannot be written (%w); Doppel serves it, and a change needs the directory writable", filepath.Dir(s.path), err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open the lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Load reads and checks the document.
func (s *Store) Load(ctx context.Context) (*store.Snapshot, error) {
	src, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", s.path, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	snap, err := store.SnapshotOf(src)
	if err == nil {
		s.remember(src, snap.Revision)
	}
	return snap, err
}

// Save writes doc in canonical form if the stored document's revision is
// still expected. Comments and formatting of the file are not kept.
func (s *Store) Save(ctx context.Context, doc *config.Document, expected config.Revision) (config.Revision, error) {
	out, err := config.Canonical(doc)
	if err != nil {
		return "", err
	}
	unlock, err := s.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	if current := s.currentRevision(); current != expected {
		return "", store.ErrRevisionMismatch
	}
	if err := s.replace(out); err != nil {
		return "", err
	}
	rev, err := config.DocumentRevision(doc)
	if err == nil {
		s.remember(out, rev)
	}
	return rev, err
}

// currentRevision is the stored document's revision, or "" when it does
// not parse (someone is editing it: no compare-and-swap can succeed).
func (s *Store) currentRevision() config.Revision {
	src, err := os.ReadFile(s.path)
	if err != nil {
		return ""
	}
	if rev, ok := s.recall(src); ok {
		return rev
	}
	doc, err := config.Parse(src)
	if err != nil {
		return ""
	}
	rev, _ := config.DocumentRevision(doc)
	s.remember(src, rev)
	return rev
}

// replace writes content to a temporary file beside the document, then
// renames it over the document.
func (s *Store) replace(content []byte) error {
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, tempPrefix(s.path))
	if err != nil {
		return fmt.Errorf("cannot write beside %s: %w", s.path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(s.path); err == nil {
		mode = fi.Mode().Perm()
	}
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV) {
			return fmt.Errorf("cannot replace %s (%v): it looks like a single file mounted into a container; mount the directory that holds it instead, so that writes can replace it atomically", s.path, err)
		}
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func (s *Store) templatePath(proxy, name string) (string, error) {
	if err := config.CheckTemplateName(name); err != nil {
		return "", err
	}
	if _, err := config.ParseName(proxy); err != nil {
		return "", err
	}
	return filepath.Join(s.templates, proxy, name), nil
}

// Templates lists a proxy's template files, by name.
func (s *Store) Templates(ctx context.Context, proxy string) ([]store.TemplateFile, error) {
	entries, err := os.ReadDir(filepath.Join(s.templates, proxy))
	if errors.Is(err, fs.ErrNotExist) {
		return []store.TemplateFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []store.TemplateFile{}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, store.TemplateFile{Name: e.Name(), Size: info.Size()})
	}
	slices.SortFunc(out, func(a, b store.TemplateFile) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ReadTemplate returns a template file's content.
func (s *Store) ReadTemplate(ctx context.Context, proxy, name string) ([]byte, error) {
	p, err := s.templatePath(proxy, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, store.ErrNotFound
	}
	return b, err
}

// WriteTemplate stores a template file atomically.
func (s *Store) WriteTemplate(ctx context.Context, proxy, name string, content []byte) error {
	p, err := s.templatePath(proxy, name)
	if err != nil {
		return err
	}
	return store.WriteTemplateFile(p, content)
}

// DeleteTemplate removes one template file.
func (s *Store) DeleteTemplate(ctx context.Context, proxy, name string) error {
	p, err := s.templatePath(proxy, name)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return store.ErrNotFound
	}
	return err
}

// MoveTemplates renames a proxy's template directory.
func (s *Store) MoveTemplates(ctx context.Context, from, to string) error {
	src, dst := filepath.Join(s.templates, from), filepath.Join(s.templates, to)
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.Rename(src, dst)
}

// DeleteTemplates removes a proxy's template directory.
func (s *Store) DeleteTemplates(ctx context.Context, proxy string) error {
	if _, err := config.ParseName(proxy); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(s.templates, proxy))
}

// KeepTemplates removes every file of a proxy's template directory whose
// name keep refuses, and the directory once it is empty.
func (s *Store) KeepTemplates(ctx context.Context, proxy string, keep func(name string) bool) error {
	if _, err := config.ParseName(proxy); err != nil {
		return err
	}
	return store.KeepTemplateDir(filepath.Join(s.templates, proxy), keep)
}

// Close releases nothing: the lock is only held while writing.
func (s *Store) Close() error { return nil }
