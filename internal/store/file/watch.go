package file

import (
	"context"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce gathers the bursts of events one save makes (an editor writes
// a temporary file, renames it, changes modes) into one change.
const debounce = 150 * time.Millisecond

// Watch calls changed after the document at path changes, however it is
// written: in place, or to a temporary file renamed over it (which is why
// its directory is watched, not the file). Events are debounced. The
// returned function stops watching.
func Watch(ctx context.Context, path string, changed func()) (func(), error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) != abs || ev.Op == fsnotify.Chmod {
					continue
				}
				fire = time.After(debounce)
			case <-fire:
				fire = nil
				changed()
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		w.Close()
		<-done
	}, nil
}
