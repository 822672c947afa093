package postgres

import (
	"context"
	"crypto/sha512"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema and its ledger are Doppel 1.1's (SPEC §19.3): the ledger is
// sqlx's table _sqlx_migrations, migrations 1 to 5 are 1.1's, and ours are
// 6 and up, in tables of their own, which 1.1 reports as unknown and
// ignores. Migrations are applied only by `doppel config migrate`, never at
// startup, under the advisory lock sqlx takes, so that this binary and 1.1
// never migrate one database at once.

//go:embed migrations/*.sql
var migrationFS embed.FS

// baseline creates on an empty database the schema 1.1's five migrations
// leave; the ledger then records those five.
//
//go:embed baseline.sql
var baseline string

const (
	ledger = "_sqlx_migrations"
	// legacyLedger is the ledger of Doppel in Go before it kept 1.1's.
	legacyLedger = "doppel_migrations"
)

// Migration is one migration of the ledger.
type Migration struct {
	Version     int64
	Description string
	// SQL is empty for 1.1's own: baseline creates what they leave.
	SQL string
	// Checksum is the SHA-384 the ledger records: of 1.1's file for 1.1's,
	// of ours for ours.
	Checksum []byte
}

// Released reports whether m is one of Doppel 1.1's migrations.
func (m Migration) Released() bool { return m.SQL == "" }

// released are Doppel 1.1's migrations as its ledger records them.
var released = []Migration{
	{Version: 1, Description: "initial", Checksum: mustHex("f8c4edcf5074f93517ef0d214621b28a2b36623c69aeb6bfc6890bd44037ef06104cd3e94d7d4659c63ea0f1dd7f7b1b")},
	{Version: 2, Description: "proxy rewrite redirects", Checksum: mustHex("39ef743ec616fbb4c5b9ae32b84f530bad77f582c0235b392ecba36eccbb66190d34065721d6f7c6253d74bf4d19a839")},
	{Version: 3, Description: "admin groups", Checksum: mustHex("fb6fc853501d9b93bcef625fc3d8fd48ffe65c367b79916b7edd89ea07d943ead93c6cd228234266dd3fedce8cdadf3c")},
	{Version: 4, Description: "admin public", Checksum: mustHex("3aeca4994e14ab5c28e7160f0febe57aceeee5c56d7dc4b23397252a4f52ccfc76a1d8e0aff62ed132ec69395b89f2a0")},
	{Version: 5, Description: "settings as jsonb", Checksum: mustHex("503972a9fa00b34f17a5fb2851ed5dcc31ecc4a41b086cf4280adc611a079f5dbde1565d44581108e0af8d6674669541")},
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Migrations lists every migration this binary knows, in order: 1.1's,
// then ours from migrations/NNNN_words.sql (described as sqlx describes a
// file: the words with spaces), their checksums computed once. The list
// is shared: callers read it.
var Migrations = sync.OnceValue(func() []Migration {
	out := slices.Clone(released)
	entries, _ := fs.ReadDir(migrationFS, "migrations")
	for _, e := range entries {
		b, _ := migrationFS.ReadFile("migrations/" + e.Name())
		num, words, _ := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, _ := strconv.ParseInt(num, 10, 64)
		sum := sha512.Sum384(b)
		out = append(out, Migration{Version: v, Description: strings.ReplaceAll(words, "_", " "), SQL: string(b), Checksum: sum[:]})
	}
	slices.SortFunc(out, func(a, b Migration) int { return int(a.Version - b.Version) })
	return out
})

// applied is one row of the ledger.
type applied struct {
	version     int64
	description string
	checksum    []byte
	success     bool
}

// ledgerState is what a database holds of Doppel's schema.
type ledgerState struct {
	ledger, legacy, tables bool
	rows                   []applied // ordered by version
}

func inspect(ctx context.Context, q querier) (ledgerState, error) {
	var st ledgerState
	err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL, to_regclass('configurations') IS NOT NULL`,
		ledger, legacyLedger).Scan(&st.ledger, &st.legacy, &st.tables)
	if err != nil || !st.ledger {
		return st, err
	}
	rows, err := q.Query(ctx, `SELECT version, description, checksum, success FROM `+ledger+` ORDER BY version`)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var a applied
		if err := rows.Scan(&a.version, &a.description, &a.checksum, &a.success); err != nil {
			return st, err
		}
		st.rows = append(st.rows, a)
	}
	return st, rows.Err()
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// finding is one line about the ledger.
type finding struct {
	kind string // missing, failed, changed, unknown
	line string
	// released: the line is about one of 1.1's migrations.
	released bool
}

// behind: a migration of this binary is missing, failed or changed; an
// unknown one is said without being behind.
func (f finding) behind() bool { return f.kind != "unknown" }

// findings compares the ledger with the migrations this binary knows, in
// 1.1's words.
func (st ledgerState) findings() []finding {
	var out []finding
	known := Migrations()
	for _, m := range known {
		i := slices.IndexFunc(st.rows, func(a applied) bool { return a.version == m.Version })
		switch {
		case i < 0:
			out = append(out, finding{kind: "missing", line: fmt.Sprintf("missing: migration %d (%s)", m.Version, m.Description), released: m.Released()})
		case !st.rows[i].success:
			out = append(out, finding{kind: "failed", line: fmt.Sprintf("failed: migration %d (%s) is recorded as not having completed", m.Version, m.Description)})
		case !slices.Equal(st.rows[i].checksum, m.Checksum):
			out = append(out, finding{kind: "changed", line: fmt.Sprintf("changed: migration %d (%s) does not match the file this binary carries", m.Version, m.Description)})
		}
	}
	for _, a := range st.rows {
		if !slices.ContainsFunc(known, func(m Migration) bool { return m.Version == a.version }) {
			out = append(out, finding{kind: "unknown", line: fmt.Sprintf("unknown: migration %d (%s) is applied but not carried by this binary", a.version, a.description)})
		}
	}
	return out
}

// halfReleased reports a database 1.1 began to migrate and did not finish:
// some of 1.1's migrations applied, not all.
func (st ledgerState) halfReleased() bool {
	n := 0
	for _, a := range st.rows {
		if a.version >= 1 && a.version <= int64(len(released)) {
			n++
		}
	}
	return n > 0 && n < len(released)
}

// Report is what `config migrate` or `config migrate --status` says, and
// whether the database is behind this binary (exit 1).
type Report struct {
	Lines  []string
	Behind bool
}

const (
	runMigrate    = "run `doppel config migrate`"
	runReleased   = "run Doppel 1.1's `doppel config migrate` first (only it applies its own migrations to a database it began), then `doppel config migrate`"
	legacyLine    = "the schema is in the layout of an earlier Doppel in Go (ledger " + legacyLedger + "); `doppel config migrate` moves it to Doppel 1.1's layout, nothing lost"
	untouchedLine = "no migrations have been applied"
)

// Status reports, changing nothing, what the ledger says against the
// migrations this binary knows, in 1.1's lines.
func Status(ctx context.Context, pool *pgxpool.Pool) (Report, error) {
	st, err := inspect(ctx, pool)
	if err != nil {
		return Report{}, err
	}
	return st.status(), nil
}

func (st ledgerState) status() Report {
	if !st.ledger {
		if st.legacy {
			return Report{Lines: []string{legacyLine}, Behind: true}
		}
		return Report{Lines: []string{untouchedLine + "; " + runMigrate}, Behind: true}
	}
	var r Report
	if len(st.rows) == 0 {
		r.Lines = append(r.Lines, "schema version none; 0 migrations applied")
	} else {
		r.Lines = append(r.Lines, fmt.Sprintf("schema version %d; %s applied", st.rows[len(st.rows)-1].version, plural(len(st.rows))))
	}
	for _, f := range st.findings() {
		r.Lines = append(r.Lines, f.line)
		r.Behind = r.Behind || f.behind()
	}
	switch {
	case st.halfReleased():
		r.Lines = append(r.Lines, runReleased)
	case r.Behind:
		r.Lines = append(r.Lines, runMigrate)
	default:
		r.Lines = append(r.Lines, "up to date")
	}
	return r
}

func plural(n int) string {
	if n == 1 {
		return "1 migration"
	}
	return strconv.Itoa(n) + " migrations"
}

// Refused is a database `config migrate` will not write to, with every
// line that says why.
type Refused struct{ Lines []string }

func (e *Refused) Error() string {
	return "the database is not migrated, nothing was changed:\n" + strings.Join(e.Lines, "\n")
}

// lockID is the advisory lock sqlx takes to migrate a database, so that
// this binary and Doppel 1.1 never migrate one at the same time.
func lockID(database string) int64 {
	return 0x3d32ad9e * int64(crc32.ChecksumIEEE([]byte(database)))
}

// Migrate brings the database to every migration this binary knows: on an
// empty one, 1.1's schema and its five ledger rows, then ours; on one 1.1
// migrated, ours only; on one in the layout of an earlier Doppel in Go, a
// move to 1.1's layout, nothing lost. A database whose ledger this binary
// cannot follow (half-migrated by 1.1, a failed or changed migration, a
// newer binary's migration before one of ours) is refused whole, nothing
// written. It reports 1.1's line: how many ran, how many in all.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (Report, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Report{}, err
	}
	defer conn.Release()
	var database string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&database); err != nil {
		return Report{}, err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockID(database)); err != nil {
		return Report{}, err
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, lockID(database))

	st, err := inspect(ctx, conn)
	if err != nil {
		return Report{}, err
	}
	before, moved := len(st.rows), st.legacy
	switch {
	case st.ledger && st.legacy:
		return Report{}, &Refused{Lines: []string{"the database holds both ledgers, " + ledger + " and " + legacyLedger + ": it was migrated by two kinds of Doppel; drop the one that is not in use"}}
	case st.legacy:
		if err := moveLegacy(ctx, conn.Conn()); err != nil {
			return Report{}, err
		}
	case !st.ledger && st.tables:
		return Report{}, &Refused{Lines: []string{"the table configurations exists but no migration ledger does: this database was not made by `doppel config migrate`; migrate an empty database and `doppel config push` the configuration into it"}}
	case !st.ledger, len(st.rows) == 0 && !st.tables:
		if err := createBaseline(ctx, conn.Conn()); err != nil {
			return Report{}, err
		}
	}
	if st, err = inspect(ctx, conn); err != nil {
		return Report{}, err
	}
	if moved {
		// The move recorded what the old ledger had applied.
		before = len(st.rows)
	}
	if refused := st.refusal(); refused != nil {
		return Report{}, refused
	}
	ran := len(st.rows) - before
	for _, m := range Migrations() {
		if slices.ContainsFunc(st.rows, func(a applied) bool { return a.version == m.Version }) {
			continue
		}
		if err := apply(ctx, conn.Conn(), m); err != nil {
			return Report{}, err
		}
		ran++
	}
	total := before + ran
	var r Report
	if moved {
		r.Lines = append(r.Lines, "moved from the ledger "+legacyLedger+" to Doppel 1.1's layout, nothing lost")
	}
	if ran == 0 {
		r.Lines = append(r.Lines, "already up to date; "+plural(total)+" applied")
	} else {
		r.Lines = append(r.Lines, "applied "+plural(ran)+"; "+plural(total)+" in total")
	}
	return r, nil
}

// refusal is why the migrations of this binary cannot follow the ledger,
// or nil: one of 1.1's missing (only 1.1 finishes what it began), a
// migration failed or changed, or one of ours missing while a newer
// binary's is applied (ours would run out of order).
func (st ledgerState) refusal() *Refused {
	var blocking, unknown []string
	pending := false
	for _, f := range st.findings() {
		switch {
		case f.kind == "unknown":
			unknown = append(unknown, f.line)
		case f.kind == "missing" && !f.released:
			pending = true
		default:
			blocking = append(blocking, f.line)
		}
	}
	switch {
	case st.halfReleased():
		return &Refused{Lines: append(append(blocking, unknown...), runReleased)}
	case len(blocking) > 0:
		return &Refused{Lines: append(blocking, unknown...)}
	case pending && len(unknown) > 0:
		return &Refused{Lines: append(unknown, "a newer Doppel migrated this database: the migrations this binary lacks would run after its own; migrate with the newer binary")}
	}
	return nil
}

// apply runs one of our migrations and records it, in one transaction.
func apply(ctx context.Context, conn *pgx.Conn, m Migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		start := time.Now()
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.Version, m.Description, err)
		}
		return record(ctx, tx, m, time.Since(start))
	})
}

func record(ctx context.Context, tx pgx.Tx, m Migration, took time.Duration) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+ledger+` (version, description, success, checksum, execution_time) VALUES ($1, $2, TRUE, $3, $4)`,
		m.Version, m.Description, m.Checksum, took.Nanoseconds())
	return err
}

// recordReleased records 1.1's five migrations as applied, sharing the
// time it took to make what they leave.
func recordReleased(ctx context.Context, tx pgx.Tx, took time.Duration) error {
	for _, m := range released {
		if err := record(ctx, tx, m, took/time.Duration(len(released))); err != nil {
			return err
		}
	}
	return nil
}

// createLedger is sqlx's ledger table, as sqlx creates it.
const createLedger = `CREATE TABLE IF NOT EXISTS ` + ledger + ` (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
)`

// createBaseline makes an empty database what 1.1's five migrations make
// it, and records them.
func createBaseline(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		start := time.Now()
		if _, err := tx.Exec(ctx, createLedger); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, baseline); err != nil {
			return fmt.Errorf("creating Doppel 1.1's schema: %w", err)
		}
		return recordReleased(ctx, tx, time.Since(start))
	})
}

// The legacy ledger's migrations: what an earlier Doppel in Go applied,
// by their SHA-256 then.
var legacy = map[int]string{
	1: "ba4c377a11c96aa0db96482b42442d9baf993a0e06e5384ced735a2f1fb85804", // schema
	2: "c06115f5df3fd9de8f4306526495e42ebe5a3c8a0ced4504e28218e20cc36809", // sessions, as 0006 creates them
}

// moveLegacy moves a database of an earlier Doppel in Go to 1.1's layout
// in one transaction: revisions from text to their 64 bits, updated_at,
// templates without a foreign key, 1.1's ledger with its five rows and
// ours up to the revisions table, which learns that Doppel in Go wrote
// every configuration stored.
func moveLegacy(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT version, checksum FROM `+legacyLedger+` ORDER BY version`)
	if err != nil {
		return err
	}
	had := map[int]bool{}
	var lines []string
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			rows.Close()
			return err
		}
		switch want, ok := legacy[v]; {
		case !ok:
			lines = append(lines, fmt.Sprintf("unknown: migration %d of %s is not one this binary can move", v, legacyLedger))
		case sum != want:
			lines = append(lines, fmt.Sprintf("changed: migration %d of %s does not match the file it was applied from", v, legacyLedger))
		}
		had[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !had[1] {
		lines = append(lines, fmt.Sprintf("missing: migration 1 of %s", legacyLedger))
	}
	if len(lines) > 0 {
		return &Refused{Lines: lines}
	}
	all := Migrations()
	at := func(v int64) Migration {
		return all[slices.IndexFunc(all, func(m Migration) bool { return m.Version == v })]
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		start := time.Now()
		rows, err := tx.Query(ctx, `SELECT conname FROM pg_constraint WHERE conrelid = 'templates'::regclass AND contype = 'f'`)
		if err != nil {
			return err
		}
		fkeys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range fkeys {
			if _, err := tx.Exec(ctx, `ALTER TABLE templates DROP CONSTRAINT `+pgx.Identifier{name}.Sanitize()); err != nil {
				return err
			}
		}
		for _, sql := range []string{
			`ALTER TABLE configurations ALTER COLUMN revision TYPE BIGINT USING ('x' || revision)::bit(64)::bigint`,
			`ALTER TABLE configurations ADD COLUMN updated_at TIMESTAMPTZ NOT NULL DEFAULT now()`,
			// settings after updated_at, as in 1.1's schema.
			`ALTER TABLE configurations RENAME COLUMN settings TO settings_before_move`,
			`ALTER TABLE configurations ADD COLUMN settings JSONB`,
			`UPDATE configurations SET settings = settings_before_move`,
			`ALTER TABLE configurations ALTER COLUMN settings SET NOT NULL`,
			`ALTER TABLE configurations DROP COLUMN settings_before_move`,
			createLedger,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("moving to Doppel 1.1's layout: %w", err)
			}
		}
		if err := recordReleased(ctx, tx, time.Since(start)); err != nil {
			return err
		}
		sessions := at(6)
		if !had[2] {
			if _, err := tx.Exec(ctx, sessions.SQL); err != nil {
				return err
			}
		}
		revisions := at(7)
		if _, err := tx.Exec(ctx, revisions.SQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO doppel_revisions (config, revision) SELECT name, revision FROM configurations`); err != nil {
			return err
		}
		for _, m := range []Migration{sessions, revisions} {
			if err := record(ctx, tx, m, 0); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DROP TABLE `+legacyLedger)
		return err
	})
}

// ErrNotMigrated is why serve, push and pull refuse a database whose
// schema is not this binary's.
var ErrNotMigrated = errors.New("the database schema is not ready")

// CheckMigrated refuses a database that lacks a migration this binary
// knows, or holds one failed or changed; one a newer binary applied is
// no reason to refuse.
func CheckMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	st, err := inspect(ctx, pool)
	if err != nil {
		return err
	}
	r := st.status()
	if !r.Behind {
		return nil
	}
	detail := r.Lines[0]
	if st.ledger {
		for _, f := range st.findings() {
			if f.behind() {
				// 1.1's words for a migration missing.
				detail = f.line
				if m, ok := strings.CutPrefix(f.line, "missing: "); ok {
					detail = m + " has not been applied"
				}
				break
			}
		}
	} else if !st.legacy {
		detail = untouchedLine
	}
	next := runMigrate
	if st.halfReleased() {
		next = runReleased
	}
	return fmt.Errorf("%w (%s); %s", ErrNotMigrated, detail, next)
}
