package store

import (
	"context"
	"errors"
	"log/slog"

	"github.com/doppelproxy/doppel/internal/config"
)

// Store is where a configuration lives. Everything above it is written
// against this interface, so the choice of store changes where the
// configuration is kept and nothing about what Doppel does with it. Every
// implementation passes the conformance suite in internal/store/storetest.
type Store interface {
	// Load reads the stored configuration. Its bytes are parsed by the same
	// code as a YAML file; a document that does not parse or validate is an
	// error wrapping *config.Invalid.
	Load(ctx context.Context) (*Snapshot, error)
	// Save writes doc if the stored configuration's revision is still
	// expected; otherwise it writes nothing and returns ErrRevisionMismatch,
	// or ErrNotFound when a store that keeps configurations by name holds
	// none of that name (PostgreSQL).
	// The new revision is returned.
	Save(ctx context.Context, doc *config.Document, expected config.Revision) (config.Revision, error)

	// Templates lists a proxy's template files (none is an empty list).
	Templates(ctx context.Context, proxy string) ([]TemplateFile, error)
	// ReadTemplate returns a template file's content, or ErrNotFound.
	ReadTemplate(ctx context.Context, proxy, name string) ([]byte, error)
	// WriteTemplate stores a template file, replacing one of that name.
	WriteTemplate(ctx context.Context, proxy, name string, content []byte) error
	// DeleteTemplate removes a template file; a missing one is ErrNotFound.
	DeleteTemplate(ctx context.Context, proxy, name string) error
	// MoveTemplates renames a proxy's template files to another proxy.
	MoveTemplates(ctx context.Context, from, to string) error
	// DeleteTemplates removes every template file of a proxy.
	DeleteTemplates(ctx context.Context, proxy string) error
	// KeepTemplates removes every template file of a proxy whose name keep
	// refuses, whatever the name (a dot file, one that is not UTF-8), and
	// the proxy's directory once nothing is left in it.
	KeepTemplates(ctx context.Context, proxy string, keep func(name string) bool) error

	// Close releases what the store holds.
	Close() error
}

// Materializer is a store whose template files live elsewhere (a
// database): it writes them out under the template directory before the
// configuration that names them is put in force.
type Materializer interface {
	Materialize(ctx context.Context) error
}

// Watcher is a store that can tell when its configuration changed behind
// this process: another replica's write, an edit of the file.
type Watcher interface {
	// Watch calls changed after each change, debounced, from one goroutine
	// of its own, until ctx ends; revision is the revision the change
	// announced, or "" when the store cannot tell (a file, a catch-up after
	// a lost connection). When changed reports that it is not done (a load
	// failed for a reason that may pass) it is called again, backing off,
	// until it is or another change comes. stopped is closed once that
	// goroutine has returned, after ctx ended. An error means nothing is
	// watched.
	Watch(ctx context.Context, log *slog.Logger, changed func(revision string) (done bool)) (stopped <-chan struct{}, err error)
	// Describe names what is watched, for log lines ("the database").
	Describe() string
}

// Snapshot is one read of the stored configuration.
type Snapshot struct {
	Document *config.Document
	Revision config.Revision
}

// TemplateFile names one stored template file.
type TemplateFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

var (
	// ErrRevisionMismatch: the stored configuration moved since it was read.
	ErrRevisionMismatch = errors.New("the stored configuration changed since it was read")
	// ErrNotFound: no such configuration or template file.
	ErrNotFound = errors.New("not found")
)

// SnapshotOf checks a stored document's text and fingerprints it: every
// store reads its bytes this one way.
func SnapshotOf(src []byte) (*Snapshot, error) {
	doc, err := config.Load(src)
	if err != nil {
		return nil, err
	}
	rev, err := config.DocumentRevision(doc)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Document: doc, Revision: rev}, nil
}
