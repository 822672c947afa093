package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteTemplateFile writes content to path atomically, creating its
// directory: a temporary file beside it, renamed over it, so a reader sees
// the old file or the new one, never half. Both stores write template
// files this way.
func WriteTemplateFile(path string, content []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".upload-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// KeepTemplateDir removes every entry of dir whose name keep refuses,
// whatever it is (a dot file, a name that is not UTF-8, a directory), then
// dir itself when nothing is left: both stores keep a proxy's template
// directory exactly as what they hold says. A missing dir is nothing to do.
func KeepTemplateDir(dir string, keep func(name string) bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	left := 0
	for _, e := range entries {
		if keep(e.Name()) && e.Type().IsRegular() {
			left++
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			left++
		}
	}
	if left == 0 {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
