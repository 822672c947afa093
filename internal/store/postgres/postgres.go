// Package postgres is the store that keeps configurations in PostgreSQL:
// the document without its proxies in `configurations`, one row per proxy
// in `proxies` (ordinal keeps their order), template files in `templates`.
// Rows are parsed by the same code as a YAML file, so a row edited by hand
// is held to the same rules and reported against its field and proxy.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/goccy/go-yaml"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Channel is the NOTIFY channel of a configuration name: every write
// notifies it, every serve of that name listens on it.
func Channel(name string) string { return channelName("doppel_config_", name) }

// maxIdentifier is PostgreSQL's longest name (NAMEDATALEN - 1), channels'
// included.
const maxIdentifier = 63

// channelName is prefix+name, or, when that would be longer than a
// channel may be, prefix and a hash of name.
func channelName(prefix, name string) string {
	if len(prefix)+len(name) <= maxIdentifier {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:16])
}

// Store is a PostgreSQL store of one configuration name.
type Store struct {
	pool *pgxpool.Pool
	// background are the deletions the request path starts (the fleet's
	// counters past their bound); Close waits for them.
	background sync.WaitGroup
	// counters is the pool of the fleet's counters (countPool).
	countersOnce sync.Once
	counters     *pgxpool.Pool
	countersErr  error
	url          string // for LISTEN: a connection of its own, outside the pool
	name         string
	templates    string // templates.dir: a cache of the templates table
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.Materializer = (*Store)(nil)
	_ store.Watcher      = (*Store)(nil)
)

// Open connects to url. Errors never show the URL's password.
func Open(ctx context.Context, url, name, templates string) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("cannot use the database %s: %s", store.MaskURL(url), maskIn(err, url))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database %s: %s", store.MaskURL(url), maskIn(err, url))
	}
	return &Store{pool: pool, url: url, name: name, templates: templates}, nil
}

// countersConns is how many connections the fleet's counters keep, apart
// from the store's: a burst of counted requests never queues behind a
// load, a session write or a heartbeat, nor they behind it.
const countersConns = 16

// countPool is the pool the fleet's counters count in, opened with the
// first of them.
func (s *Store) countPool() (*pgxpool.Pool, error) {
	s.countersOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(s.url)
		if err != nil {
			s.countersErr = errors.New(maskIn(err, s.url))
			return
		}
		cfg.MaxConns = countersConns
		if s.counters, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
			s.countersErr = errors.New(maskIn(err, s.url))
		}
	})
	return s.counters, s.countersErr
}

// maskIn removes the URL and its password from a driver error.
func maskIn(err error, url string) string {
	msg := strings.ReplaceAll(err.Error(), url, store.MaskURL(url))
	if i := strings.Index(url, "://"); i >= 0 {
		if at := strings.Index(url[i+3:], "@"); at >= 0 {
			if _, pass, ok := strings.Cut(url[i+3:i+3+at], ":"); ok && pass != "" {
				msg = strings.ReplaceAll(msg, pass, store.Masked)
			}
		}
	}
	return msg
}

// Pool is the connection pool (migrations, LISTEN).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Name is the configuration name.
func (s *Store) Name() string { return s.name }

// Close closes the pool.
func (s *Store) Close() error {
	s.background.Wait()
	s.countersOnce.Do(func() {}) // none is opened after this
	if s.counters != nil {
		s.counters.Close()
	}
	s.pool.Close()
	return nil
}

// Load reads the configuration in one REPEATABLE READ transaction: a
// configuration spans tables, and it must be one snapshot. Its revision is
// the one stored (SPEC §19.3): a configuration Doppel 1.1 wrote last keeps
// 1.1's revision, computed otherwise, until the next write; one Doppel in Go
// wrote last must still be the revision of its rows, or the rows were
// changed behind its back and the load is refused as diverged.
func (s *Store) Load(ctx context.Context) (*store.Snapshot, error) {
	src, stored, ours, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := store.SnapshotOf(src)
	if err != nil {
		return nil, err
	}
	if snap.Revision != stored {
		if ours {
			return nil, &config.Invalid{Violations: []config.Violation{{Message: fmt.Sprintf(
				"the stored revision (%s) does not match the configuration it labels (%s); the rows and the revision column have diverged (configuration `%s` was changed by hand?): `doppel config push` it to store it whole again",
				stored, snap.Revision, s.name)}}}
		}
		snap.Revision = stored
	}
	return snap, nil
}

// SetTemplates sets templates.dir once the document that names it is read.
func (s *Store) SetTemplates(dir string) { s.templates = dir }

// TemplatesDir is the directory the template files are written out under.
func (s *Store) TemplatesDir() string { return s.templates }

// Source is the stored document's text, before any check: what
// `config validate` and `config pull` read.
func (s *Store) Source(ctx context.Context) ([]byte, error) {
	src, _, _, err := s.read(ctx)
	return src, err
}

// read assembles the stored document as JSON (which is YAML), so the
// configuration's own loader reads it, paths and all, with the revision
// stored and whether Doppel in Go wrote it.
func (s *Store) read(ctx context.Context) (src []byte, stored config.Revision, ours bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, "", false, err
	}
	defer tx.Rollback(ctx)
	var settings []byte
	var revision int64
	err = tx.QueryRow(ctx, `SELECT c.settings, c.revision, r.revision IS NOT DISTINCT FROM c.revision
		FROM configurations c LEFT JOIN doppel_revisions r ON r.config = c.name WHERE c.name = $1`, s.name).Scan(&settings, &revision, &ours)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", false, fmt.Errorf("configuration %q: %w", s.name, store.ErrNotFound)
	}
	if err != nil {
		return nil, "", false, err
	}
	src, err = assemble(ctx, tx, s.name, settings)
	return src, revisionOf(revision), ours, err
}

// assemble is the document of settings and the proxies' rows.
func assemble(ctx context.Context, tx pgx.Tx, name string, settings []byte) ([]byte, error) {
	rows, err := tx.Query(ctx, `SELECT document FROM proxies WHERE config = $1 ORDER BY ordinal, name`, name)
	if err != nil {
		return nil, err
	}
	var proxies []json.RawMessage
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		proxies = append(proxies, json.RawMessage(d))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(settings, &doc); err != nil {
		return nil, fmt.Errorf("configuration %q: the settings row is not a JSON object: %w", name, err)
	}
	if doc == nil {
		doc = map[string]json.RawMessage{}
	}
	if proxies == nil {
		proxies = []json.RawMessage{}
	}
	p, _ := json.Marshal(proxies)
	doc["proxies"] = p
	return json.Marshal(doc)
}

// column is a revision in the revision column: its 64 bits in a signed
// BIGINT, as Doppel 1.1 stores them.
func column(rev config.Revision) (int64, error) {
	u, err := strconv.ParseUint(string(rev), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a revision: %w", rev, err)
	}
	return int64(u), nil
}

// revisionOf reads the revision column.
func revisionOf(v int64) config.Revision { return config.Revision(fmt.Sprintf("%016x", uint64(v))) }

// split turns a document into its settings and its proxies, as JSON.
func split(doc *config.Document) (settings []byte, proxies [][]byte, err error) {
	y, err := config.Canonical(doc)
	if err != nil {
		return nil, nil, err
	}
	var all map[string]any
	if err := yaml.Unmarshal(y, &all); err != nil {
		return nil, nil, err
	}
	list, _ := all["proxies"].([]any)
	delete(all, "proxies")
	if settings, err = json.Marshal(all); err != nil {
		return nil, nil, err
	}
	for _, p := range list {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, nil, err
		}
		proxies = append(proxies, b)
	}
	return settings, proxies, nil
}

// Save writes doc in one transaction if the stored revision is still
// expected (compare-and-swap: UPDATE ... WHERE revision = $expected; zero
// rows is a mismatch), and notifies every serve of this name.
func (s *Store) Save(ctx context.Context, doc *config.Document, expected config.Revision) (config.Revision, error) {
	return s.save(ctx, doc, &expected)
}

// Put writes doc whatever is stored (config push without --if-revision),
// creating the configuration when it does not exist.
func (s *Store) Put(ctx context.Context, doc *config.Document) (config.Revision, error) {
	return s.save(ctx, doc, nil)
}

func (s *Store) save(ctx context.Context, doc *config.Document, expected *config.Revision) (config.Revision, error) {
	rev, err := config.DocumentRevision(doc)
	if err != nil {
		return "", err
	}
	settings, proxies, err := split(doc)
	if err != nil {
		return "", err
	}
	next, err := column(rev)
	if err != nil {
		return "", err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	if expected == nil {
		_, err = tx.Exec(ctx, `INSERT INTO configurations (name, revision, settings) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET revision = EXCLUDED.revision, settings = EXCLUDED.settings, updated_at = now()`, s.name, next, settings)
		if err != nil {
			return "", err
		}
	} else {
		was, err := column(*expected)
		if err != nil {
			return "", err
		}
		tag, err := tx.Exec(ctx, `UPDATE configurations SET revision = $2, settings = $3, updated_at = now() WHERE name = $1 AND revision = $4`,
			s.name, next, settings, was)
		if err != nil {
			return "", err
		}
		if tag.RowsAffected() == 0 {
			// Nothing was compared when there is nothing stored: telling a
			// missing configuration from a stale revision sends the user to
			// the right fix (a name, not a pull).
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configurations WHERE name = $1)`, s.name).Scan(&exists); err != nil {
				return "", err
			}
			if !exists {
				return "", fmt.Errorf("configuration %q: %w", s.name, store.ErrNotFound)
			}
			return "", store.ErrRevisionMismatch
		}
	}
	// Which revision Doppel in Go wrote: a stored one that is not this was
	// written by Doppel 1.1 since.
	if _, err := tx.Exec(ctx, `INSERT INTO doppel_revisions (config, revision) VALUES ($1, $2)
		ON CONFLICT (config) DO UPDATE SET revision = EXCLUDED.revision, written_at = now()`, s.name, next); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM proxies WHERE config = $1`, s.name); err != nil {
		return "", err
	}
	for i, p := range proxies {
		name := string(doc.Proxies[i].Name)
		if _, err := tx.Exec(ctx, `INSERT INTO proxies (config, name, ordinal, document) VALUES ($1, $2, $3, $4)`, s.name, name, i, p); err != nil {
			return "", err
		}
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel(s.name), string(rev)); err != nil {
		return "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	return rev, nil
}

// Templates lists a proxy's template files.
func (s *Store) Templates(ctx context.Context, proxy string) ([]store.TemplateFile, error) {
	rows, err := s.pool.Query(ctx, `SELECT file, length(content) FROM templates WHERE config = $1 AND proxy = $2 ORDER BY file`, s.name, proxy)
	if err != nil {
		return nil, err
	}
	out := []store.TemplateFile{}
	for rows.Next() {
		var f store.TemplateFile
		if err := rows.Scan(&f.Name, &f.Size); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// ReadTemplate returns a template file's content.
func (s *Store) ReadTemplate(ctx context.Context, proxy, name string) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT content FROM templates WHERE config = $1 AND proxy = $2 AND file = $3`, s.name, proxy, name).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return b, err
}

func check(proxy, name string) error {
	if err := config.CheckTemplateName(name); err != nil {
		return err
	}
	_, err := config.ParseName(proxy)
	return err
}

// WriteTemplate stores the row first, then the file in templates.dir.
func (s *Store) WriteTemplate(ctx context.Context, proxy, name string, content []byte) error {
	if err := check(proxy, name); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO templates (config, proxy, file, content) VALUES ($1, $2, $3, $4)
		ON CONFLICT (config, proxy, file) DO UPDATE SET content = EXCLUDED.content`, s.name, proxy, name, content); err != nil {
		return err
	}
	return s.writeFile(proxy, name, content)
}

func (s *Store) writeFile(proxy, name string, content []byte) error {
	if s.templates == "" {
		return nil
	}
	return store.WriteTemplateFile(filepath.Join(s.templates, proxy, name), content)
}

// DeleteTemplate removes the row, then the file.
func (s *Store) DeleteTemplate(ctx context.Context, proxy, name string) error {
	if err := check(proxy, name); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM templates WHERE config = $1 AND proxy = $2 AND file = $3`, s.name, proxy, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	if s.templates != "" {
		_ = os.Remove(filepath.Join(s.templates, proxy, name))
	}
	return nil
}

// MoveTemplates renames a proxy's template rows, then its directory.
func (s *Store) MoveTemplates(ctx context.Context, from, to string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM templates WHERE config = $1 AND proxy = $2`, s.name, to); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE templates SET proxy = $3 WHERE config = $1 AND proxy = $2`, s.name, from, to); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if s.templates != "" {
		src, dst := filepath.Join(s.templates, from), filepath.Join(s.templates, to)
		_ = os.RemoveAll(dst)
		if _, err := os.Stat(src); err == nil {
			return os.Rename(src, dst)
		}
	}
	return nil
}

// DeleteTemplates removes every template of a proxy, rows then files.
func (s *Store) DeleteTemplates(ctx context.Context, proxy string) error {
	if _, err := config.ParseName(proxy); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM templates WHERE config = $1 AND proxy = $2`, s.name, proxy); err != nil {
		return err
	}
	if s.templates != "" {
		return os.RemoveAll(filepath.Join(s.templates, proxy))
	}
	return nil
}

// KeepTemplates removes the proxy's rows whose file keep refuses, then
// every file of its directory that no remaining row backs (a dot file
// included), and the directory once it is empty.
func (s *Store) KeepTemplates(ctx context.Context, proxy string, keep func(name string) bool) error {
	if _, err := config.ParseName(proxy); err != nil {
		return err
	}
	list, err := s.Templates(ctx, proxy)
	if err != nil {
		return err
	}
	var drop []string
	backed := map[string]bool{}
	for _, f := range list {
		if keep(f.Name) {
			backed[f.Name] = true
		} else {
			drop = append(drop, f.Name)
		}
	}
	if len(drop) > 0 {
		if _, err := s.pool.Exec(ctx, `DELETE FROM templates WHERE config = $1 AND proxy = $2 AND file = ANY($3)`, s.name, proxy, drop); err != nil {
			return err
		}
	}
	if s.templates == "" {
		return nil
	}
	return store.KeepTemplateDir(filepath.Join(s.templates, proxy), func(name string) bool { return backed[name] })
}

// Materialize makes templates.dir exactly what the database holds (the
// database is the truth; the directory is its cache), on startup and on
// every reload: every stored file is written, and every file or directory
// no row backs is removed.
func (s *Store) Materialize(ctx context.Context) error {
	if s.templates == "" {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT proxy, file, content FROM templates WHERE config = $1`, s.name)
	if err != nil {
		return err
	}
	defer rows.Close()
	backed := map[string]map[string]bool{}
	for rows.Next() {
		var proxy, file string
		var content []byte
		if err := rows.Scan(&proxy, &file, &content); err != nil {
			return err
		}
		if check(proxy, file) != nil {
			continue // a hand-written row with an unsafe name is never written to disk
		}
		if err := s.writeFile(proxy, file, content); err != nil {
			return err
		}
		if backed[proxy] == nil {
			backed[proxy] = map[string]bool{}
		}
		backed[proxy][file] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.templates)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(s.templates, e.Name())
		files, ok := backed[e.Name()]
		if !ok || !e.IsDir() {
			errs = append(errs, os.RemoveAll(path))
			continue
		}
		errs = append(errs, store.KeepTemplateDir(path, func(name string) bool { return files[name] }))
	}
	return errors.Join(errs...)
}
