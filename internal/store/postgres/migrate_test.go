package postgres

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/pgtest"
	"github.com/doppelproxy/doppel/internal/store/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func exec(t *testing.T, p *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := p.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func wantLines(t *testing.T, what string, got Report, behind bool, want ...string) {
	t.Helper()
	if !slices.Equal(got.Lines, want) || got.Behind != behind {
		t.Fatalf("%s:\n got %q (behind %v)\nwant %q (behind %v)", what, got.Lines, got.Behind, want, behind)
	}
}

// doppel11Tables are 1.1's tables; every other one is ours.
var doppel11Tables = []string{"configurations", "proxies", "templates", "_sqlx_migrations"}

// oursOnly is the part of a catalog about our own tables.
func oursOnly(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		f := strings.Fields(l)
		return slices.Contains(doppel11Tables, f[1])
	})
}

// TestAFreshDatabaseIsDoppel11s: migrating an empty database gives exactly
// the schema and ledger 1.1's five migrations leave, then our own tables;
// migrating a database 1.1 left applies ours only and touches nothing of
// 1.1's. The two end alike.
func TestAFreshDatabaseIsDoppel11s(t *testing.T) {
	ctx := context.Background()
	fresh := pgtest.URL(t)
	p := pool(t, fresh)
	r, err := Status(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "status of an empty database", r, true, "no migrations have been applied; run `doppel config migrate`")
	if err := CheckMigrated(ctx, p); !errors.Is(err, ErrNotMigrated) || err.Error() != "the database schema is not ready (no migrations have been applied); run `doppel config migrate`" {
		t.Fatalf("serve on an empty database: %v", err)
	}
	r, err = Migrate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "first migrate", r, false, "applied 9 migrations; 9 migrations in total")
	r, _ = Migrate(ctx, p)
	wantLines(t, "second migrate", r, false, "already up to date; 9 migrations applied")
	r, _ = Status(ctx, p)
	wantLines(t, "status after", r, false, "schema version 9; 9 migrations applied", "up to date")
	if err := CheckMigrated(ctx, p); err != nil {
		t.Fatal(err)
	}
	ledger := pgtest.Ledger(t, fresh)
	for i, m := range pgtest.Doppel11Ledger {
		if f := strings.Fields(ledger[i]); f[0] != strconv.FormatInt(m.Version, 10) || !strings.Contains(ledger[i], " "+m.Description+" ") || f[len(f)-2] != m.Checksum || f[len(f)-3] != "true" {
			t.Fatalf("ledger row %d is not 1.1's: %q", i+1, ledger[i])
		}
	}

	released := pgtest.URL(t)
	pgtest.Doppel11(t, released)
	catalog11, ledger11 := pgtest.Catalog(t, released), pgtest.Ledger(t, released)
	r, err = Migrate(ctx, pool(t, released))
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "migrate a database 1.1 left", r, false, "applied 4 migrations; 9 migrations in total")
	after := pgtest.Catalog(t, released)
	if got := slices.DeleteFunc(slices.Clone(after), func(l string) bool { return slices.Contains(oursOnly(after), l) }); !slices.Equal(got, catalog11) {
		t.Fatalf("1.1's tables changed:\n got %q\nwant %q", got, catalog11)
	}
	if got := pgtest.Ledger(t, released)[:5]; !slices.Equal(got, ledger11) {
		t.Fatalf("1.1's ledger rows changed:\n got %q\nwant %q", got, ledger11)
	}
	if fromEmpty := pgtest.Catalog(t, fresh); !slices.Equal(fromEmpty, after) {
		t.Fatalf("an empty database migrated differs from 1.1's migrated:\n got %q\nwant %q", fromEmpty, after)
	}
	if len(oursOnly(after)) == 0 {
		t.Fatal("no table of ours")
	}
}

// TestALedgerThatCannotBeFollowedIsNotWritten: a database 1.1 left half
// migrated, or whose ledger holds a migration failed, changed, or one we do
// not know before ours, is reported line by line as 1.1 reports it and
// left exactly as it was.
func TestALedgerThatCannotBeFollowedIsNotWritten(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		damage string
		status []string
		refuse []string
	}{{
		name:   "half migrated by 1.1",
		damage: `DELETE FROM _sqlx_migrations WHERE version >= 4`,
		status: []string{"schema version 3; 3 migrations applied", "missing: migration 4 (admin public)", "missing: migration 5 (settings as jsonb)",
			"missing: migration 6 (sessions)", "missing: migration 7 (revisions)", "missing: migration 8 (replicas)", "missing: migration 9 (counters)", runReleased},
		refuse: []string{"missing: migration 4 (admin public)", "missing: migration 5 (settings as jsonb)", runReleased},
	}, {
		name:   "a failed migration",
		damage: `UPDATE _sqlx_migrations SET success = FALSE WHERE version = 2`,
		status: []string{"schema version 5; 5 migrations applied", "failed: migration 2 (proxy rewrite redirects) is recorded as not having completed",
			"missing: migration 6 (sessions)", "missing: migration 7 (revisions)", "missing: migration 8 (replicas)", "missing: migration 9 (counters)", runMigrate},
		refuse: []string{"failed: migration 2 (proxy rewrite redirects) is recorded as not having completed"},
	}, {
		name:   "a changed migration",
		damage: `UPDATE _sqlx_migrations SET checksum = '\x00' WHERE version = 3`,
		status: []string{"schema version 5; 5 migrations applied", "changed: migration 3 (admin groups) does not match the file this binary carries",
			"missing: migration 6 (sessions)", "missing: migration 7 (revisions)", "missing: migration 8 (replicas)", "missing: migration 9 (counters)", runMigrate},
		refuse: []string{"changed: migration 3 (admin groups) does not match the file this binary carries"},
	}, {
		name:   "a newer binary's migration before ours",
		damage: `INSERT INTO _sqlx_migrations VALUES (99, 'fleet counters', now(), TRUE, '\x01', 1)`,
		status: []string{"schema version 99; 6 migrations applied", "missing: migration 6 (sessions)", "missing: migration 7 (revisions)", "missing: migration 8 (replicas)", "missing: migration 9 (counters)",
			"unknown: migration 99 (fleet counters) is applied but not carried by this binary", runMigrate},
		refuse: []string{"unknown: migration 99 (fleet counters) is applied but not carried by this binary",
			"a newer Doppel migrated this database: the migrations this binary lacks would run after its own; migrate with the newer binary"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			url := pgtest.URL(t)
			pgtest.Doppel11(t, url)
			p := pool(t, url)
			exec(t, p, c.damage)
			catalog, ledger := pgtest.Catalog(t, url), pgtest.Ledger(t, url)
			r, err := Status(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, "status", r, true, c.status...)
			_, err = Migrate(ctx, p)
			var refused *Refused
			if !errors.As(err, &refused) || !slices.Equal(refused.Lines, c.refuse) {
				t.Fatalf("migrate: %v\nwant refused with %q", err, c.refuse)
			}
			if !slices.Equal(pgtest.Catalog(t, url), catalog) || !slices.Equal(pgtest.Ledger(t, url), ledger) {
				t.Fatal("a refused migrate wrote to the database")
			}
			if err := CheckMigrated(ctx, p); !errors.Is(err, ErrNotMigrated) {
				t.Fatalf("serve: %v", err)
			}
		})
	}

	// A newer binary's migration after ours is said, and no reason to refuse.
	url := pgtest.URL(t)
	p := pool(t, url)
	if _, err := Migrate(ctx, p); err != nil {
		t.Fatal(err)
	}
	exec(t, p, `INSERT INTO _sqlx_migrations VALUES (99, 'fleet counters', now(), TRUE, '\x01', 1)`)
	r, _ := Status(ctx, p)
	wantLines(t, "status with a newer migration", r, false, "schema version 99; 10 migrations applied",
		"unknown: migration 99 (fleet counters) is applied but not carried by this binary", "up to date")
	if err := CheckMigrated(ctx, p); err != nil {
		t.Fatal(err)
	}
	r, err := Migrate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "migrate with a newer migration", r, false, "already up to date; 10 migrations applied")
}

// TestTheLayoutOfAnEarlierDoppelInGoIsMoved: a database an earlier Doppel
// in Go migrated (ledger doppel_migrations, revisions as text, templates
// with a foreign key) is moved to 1.1's layout by migrate, nothing lost:
// the configuration at its revision, its templates, its sessions.
func TestTheLayoutOfAnEarlierDoppelInGoIsMoved(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	p := pool(t, url)
	exec(t, p, `CREATE TABLE doppel_migrations (version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for i, file := range []string{"testdata/legacy/0001_schema.sql", "testdata/legacy/0002_sessions.sql"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		exec(t, p, string(b))
		exec(t, p, `INSERT INTO doppel_migrations (version, name, checksum) VALUES ($1, $2, $3)`, i+1, "m", legacy[i+1])
	}
	doc, err := config.Load([]byte(storetest.Initial))
	if err != nil {
		t.Fatal(err)
	}
	settings, proxies, err := split(doc)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := config.DocumentRevision(doc)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, p, `INSERT INTO configurations (name, revision, settings) VALUES ('default', $1, $2)`, string(rev), settings)
	for i, d := range proxies {
		exec(t, p, `INSERT INTO proxies (config, name, ordinal, document) VALUES ('default', $1, $2, $3)`, doc.Proxies[i].Name, i, d)
	}
	exec(t, p, `INSERT INTO templates VALUES ('default', 'zeta', 'answer.json.j2', '{"a": 1}')`)
	exec(t, p, `INSERT INTO sessions VALUES ('default', 'suite-a', 'r1', now() + interval '1 hour', '{"id": "suite-a"}')`)

	r, _ := Status(ctx, p)
	wantLines(t, "status of the old layout", r, true, legacyLine)
	if err := CheckMigrated(ctx, p); !errors.Is(err, ErrNotMigrated) {
		t.Fatal(err)
	}
	r, err = Migrate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "the move", r, false, "moved from the ledger doppel_migrations to Doppel 1.1's layout, nothing lost", "applied 2 migrations; 9 migrations in total")

	migrated := pgtest.URL(t)
	if _, err := Migrate(ctx, pool(t, migrated)); err != nil {
		t.Fatal(err)
	}
	if got, want := pgtest.Catalog(t, url), pgtest.Catalog(t, migrated); !slices.Equal(got, want) {
		t.Fatalf("the moved schema is not the one migrate makes:\n got %q\nwant %q", got, want)
	}
	if got, want := pgtest.Ledger(t, url), pgtest.Ledger(t, migrated); len(got) != len(want) {
		t.Fatalf("ledger %q", got)
	}
	s, err := Open(ctx, url, "default", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Load(ctx)
	if err != nil || snap.Revision != rev || len(snap.Document.Proxies) != 2 {
		t.Fatalf("the configuration after the move: %v %v (want revision %s)", snap, err, rev)
	}
	if b, err := s.ReadTemplate(ctx, "zeta", "answer.json.j2"); err != nil || string(b) != `{"a": 1}` {
		t.Fatalf("the template after the move: %q %v", b, err)
	}
	stored, err := Sessions{s}.Load(ctx)
	if err != nil || len(stored) != 1 || stored[0].ID != "suite-a" {
		t.Fatalf("the session after the move: %v %v", stored, err)
	}
	if _, err := s.Save(ctx, doc, rev); err != nil {
		t.Fatalf("a write at the moved revision: %v", err)
	}
}

// TestAMovedLedgerThatDoesNotMatchIsNotWritten: the old ledger is checked
// before anything moves.
func TestAMovedLedgerThatDoesNotMatchIsNotWritten(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	p := pool(t, url)
	exec(t, p, `CREATE TABLE doppel_migrations (version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	b, _ := os.ReadFile("testdata/legacy/0001_schema.sql")
	exec(t, p, string(b))
	exec(t, p, `INSERT INTO doppel_migrations (version, name, checksum) VALUES (1, 'schema', 'edited'), (3, 'later', 'x')`)
	catalog := pgtest.Catalog(t, url)
	_, err := Migrate(ctx, p)
	var refused *Refused
	if !errors.As(err, &refused) || !slices.Equal(refused.Lines, []string{
		"changed: migration 1 of doppel_migrations does not match the file it was applied from",
		"unknown: migration 3 of doppel_migrations is not one this binary can move"}) {
		t.Fatalf("%v", err)
	}
	if !slices.Equal(pgtest.Catalog(t, url), catalog) {
		t.Fatal("a refused move wrote to the database")
	}
}

// doppel11Settings is a configuration's settings row as 1.1 writes it:
// serde's JSON, every default spelled out, sizes as integers.
const doppel11Settings = `{"server": {"host": "127.0.0.1", "port": 8080}, "logging": {"level": "info", "format": "json"},
 "control": {"socket": "/tmp/doppel.sock"}, "templates": {"dir": "./templates"},
 "admin": {"enable": true, "host": "127.0.0.1", "port": 8081, "auth": {"header": "X-Proxy-Authorization"},
  "tokens": [{"name": "ops", "group": "admin", "token": "3f0c1b7e-6a2d-4e8f-9b1a-5c7d2e4f6a80"}],
  "access": {"list": ["admin"], "read": ["admin"], "create": ["admin"], "update": ["admin"], "delete": ["admin"], "upload": ["admin"]},
  "upload": {"limit": 10485760}}}`

// TestARevisionDoppel11WroteIsTaken: a configuration 1.1 wrote carries its
// revision, which our function would not compute: it is served at that
// revision and a compare-and-swap on it succeeds; once we wrote it, rows
// changed behind our back are refused as diverged, as 1.1 refuses them; a
// later write by 1.1 is taken again.
func TestARevisionDoppel11WroteIsTaken(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	pgtest.Doppel11(t, url)
	p := pool(t, url)
	if _, err := Migrate(ctx, p); err != nil {
		t.Fatal(err)
	}
	const rev11 = config.Revision("9e3779b97f4a7c15") // negative as a BIGINT
	exec(t, p, `INSERT INTO configurations (name, revision, settings) VALUES ('default', $1, $2)`, int64(-7046029254386353131), doppel11Settings)
	exec(t, p, `INSERT INTO proxies VALUES ('default', 'api', 0, '{"name": "api", "type": "http", "url": "http://127.0.0.1:9/", "resolve": {"type": "default"}, "body_limit": 1048576}')`)
	s, err := Open(ctx, url, "default", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != rev11 || snap.Document.Admin.Tokens[0].Name != "ops" {
		t.Fatalf("1.1's configuration read at %s: %+v", snap.Revision, snap.Document.Admin)
	}
	other := config.Revision("0000000000000001")
	if _, err := s.Save(ctx, snap.Document, other); !errors.Is(err, store.ErrRevisionMismatch) {
		t.Fatalf("a stale revision: %v", err)
	}
	ours, err := s.Save(ctx, snap.Document, rev11)
	if err != nil {
		t.Fatalf("a write at 1.1's revision: %v", err)
	}
	var column, recorded int64
	if err := p.QueryRow(ctx, `SELECT c.revision, r.revision FROM configurations c JOIN doppel_revisions r ON r.config = c.name`).Scan(&column, &recorded); err != nil {
		t.Fatal(err)
	}
	if revisionOf(column) != ours || recorded != column {
		t.Fatalf("stored %x, recorded %x, written %s", column, recorded, ours)
	}
	if snap, err = s.Load(ctx); err != nil || snap.Revision != ours {
		t.Fatalf("our own write read back: %v %v", snap, err)
	}

	exec(t, p, `UPDATE proxies SET document = jsonb_set(document, '{timeout}', '7')`)
	_, err = s.Load(ctx)
	var inv *config.Invalid
	if !errors.As(err, &inv) || !strings.Contains(inv.Error(), "the stored revision ("+string(ours)+") does not match the configuration it labels") ||
		!strings.Contains(inv.Error(), "have diverged") {
		t.Fatalf("rows changed by hand: %v", err)
	}

	exec(t, p, `UPDATE configurations SET revision = 42`) // 1.1 writes again
	if snap, err = s.Load(ctx); err != nil || snap.Revision != "000000000000002a" || snap.Document.Proxies[0].Timeout != 7 {
		t.Fatalf("1.1's later write: %v %v", snap, err)
	}
}
