package file

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/doppelproxy/doppel/internal/store"
	"github.com/fsnotify/fsnotify"
)

var _ store.Watcher = (*Store)(nil)

// debounce gathers the bursts of events one save makes (an editor writes
// a temporary file, renames it, changes modes) into one change.
const debounce = 150 * time.Millisecond

// retryFirst is how long a change whose load failed waits before it is
// tried again; each failure doubles it, up to retryMost.
const (
	retryFirst = 250 * time.Millisecond
	retryMost  = 5 * time.Second
)

// Describe names what Watch follows.
func (s *Store) Describe() string { return "the configuration file " + s.path }

// Watch calls changed("") after the document changes, however it is
// written: in place, or to a temporary file renamed over it (which is why
// its directory is watched, not the file). Events are debounced. It stops
// when ctx ends.
func (s *Store) Watch(ctx context.Context, log *slog.Logger, changed func(revision string) bool) (<-chan struct{}, error) {
	abs, err := filepath.Abs(s.path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Dir(abs), err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer w.Close()
		var fire, retry <-chan time.Time
		pause := retryFirst
		call := func() {
			if changed("") {
				retry, pause = nil, retryFirst
				return
			}
			retry = time.After(pause)
			pause = min(pause*2, retryMost)
		}
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
				retry, pause = nil, retryFirst
				call()
			case <-retry:
				retry = nil
				call()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("watching the configuration file failed", "path", s.path, "error", err.Error())
			}
		}
	}()
	return stopped, nil
}
