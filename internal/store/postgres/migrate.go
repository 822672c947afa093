package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrations are embedded in the binary and applied only by
// `doppel config migrate`, never at startup. Each is recorded with a
// checksum, so a migration edited after it ran is reported rather than
// silently assumed (no migration library we may use keeps checksums).

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one embedded migration.
type Migration struct {
	Version  int
	Name     string
	SQL      string
	Checksum string
}

const ledger = "doppel_migrations"

// Migrations lists the embedded migrations in order.
func Migrations() []Migration {
	entries, _ := fs.ReadDir(migrationFS, "migrations")
	var out []Migration
	for _, e := range entries {
		b, _ := migrationFS.ReadFile("migrations/" + e.Name())
		num, name, _ := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, _ := strconv.Atoi(num)
		sum := sha256.Sum256(b)
		out = append(out, Migration{Version: v, Name: name, SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out
}

// Migrate applies the migrations not yet applied, each in its own
// transaction, under an advisory lock so two migrating processes do not
// race. It returns how many ran; running it again runs none.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('doppel_migrations'))`); err != nil {
		return 0, err
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock(hashtext('doppel_migrations'))`)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ledger+` (
		version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, err
	}
	applied, err := appliedMigrations(ctx, conn.Conn())
	if err != nil {
		return 0, err
	}
	ran := 0
	for _, m := range Migrations() {
		if a, ok := applied[m.Version]; ok {
			if a.checksum != m.Checksum {
				return ran, fmt.Errorf("migration %04d_%s was applied with another content (checksum changed); refusing to go on", m.Version, m.Name)
			}
			continue
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return ran, err
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			_ = tx.Rollback(ctx)
			return ran, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ledger+` (version, name, checksum) VALUES ($1, $2, $3)`, m.Version, m.Name, m.Checksum); err != nil {
			_ = tx.Rollback(ctx)
			return ran, err
		}
		if err := tx.Commit(ctx); err != nil {
			return ran, err
		}
		ran++
	}
	return ran, nil
}

type appliedMigration struct {
	name, checksum string
}

func appliedMigrations(ctx context.Context, conn *pgx.Conn) (map[int]appliedMigration, error) {
	rows, err := conn.Query(ctx, `SELECT version, name, checksum FROM `+ledger)
	if err != nil {
		return nil, err
	}
	out := map[int]appliedMigration{}
	for rows.Next() {
		var v int
		var a appliedMigration
		if err := rows.Scan(&v, &a.name, &a.checksum); err != nil {
			return nil, err
		}
		out[v] = a
	}
	return out, rows.Err()
}

// Problem is one line of `config migrate --status`.
type Problem struct {
	Line    string
	Failing bool // unknown migrations are reported without failing
}

// Status reports, without changing anything, what differs between the
// embedded migrations and the database: not applied, applied with another
// checksum, or applied but unknown to this binary.
func Status(ctx context.Context, pool *pgxpool.Pool) ([]Problem, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ledger).Scan(&exists); err != nil {
		return nil, err
	}
	applied := map[int]appliedMigration{}
	if exists {
		if applied, err = appliedMigrations(ctx, conn.Conn()); err != nil {
			return nil, err
		}
	}
	var out []Problem
	known := map[int]bool{}
	for _, m := range Migrations() {
		known[m.Version] = true
		a, ok := applied[m.Version]
		switch {
		case !ok:
			out = append(out, Problem{Line: fmt.Sprintf("%04d_%s: not applied", m.Version, m.Name), Failing: true})
		case a.checksum != m.Checksum:
			out = append(out, Problem{Line: fmt.Sprintf("%04d_%s: applied with another content (checksum changed)", m.Version, m.Name), Failing: true})
		}
	}
	for v, a := range applied {
		if !known[v] {
			out = append(out, Problem{Line: fmt.Sprintf("%04d_%s: unknown to this binary (applied by a newer one?)", v, a.name)})
		}
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Line, b.Line) })
	return out, nil
}

// ErrNotMigrated is why serve refuses an unmigrated database.
var ErrNotMigrated = errors.New("the database schema is not migrated: run doppel config migrate with this --database-url")

// CheckMigrated refuses a database whose migrations are missing or changed.
func CheckMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	problems, err := Status(ctx, pool)
	if err != nil {
		return err
	}
	for _, p := range problems {
		if p.Failing {
			return fmt.Errorf("%w (%s)", ErrNotMigrated, p.Line)
		}
	}
	return nil
}
