package pgtest

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Doppel11Ledger is the ledger Doppel 1.1 leaves after its five migrations
// (SPEC §19.3): sqlx's rows, the SHA-384 of each of 1.1's files.
var Doppel11Ledger = []struct {
	Version     int64
	Description string
	Checksum    string
}{
	{1, "initial", "f8c4edcf5074f93517ef0d214621b28a2b36623c69aeb6bfc6890bd44037ef06104cd3e94d7d4659c63ea0f1dd7f7b1b"},
	{2, "proxy rewrite redirects", "39ef743ec616fbb4c5b9ae32b84f530bad77f582c0235b392ecba36eccbb66190d34065721d6f7c6253d74bf4d19a839"},
	{3, "admin groups", "fb6fc853501d9b93bcef625fc3d8fd48ffe65c367b79916b7edd89ea07d943ead93c6cd228234266dd3fedce8cdadf3c"},
	{4, "admin public", "3aeca4994e14ab5c28e7160f0febe57aceeee5c56d7dc4b23397252a4f52ccfc76a1d8e0aff62ed132ec69395b89f2a0"},
	{5, "settings as jsonb", "503972a9fa00b34f17a5fb2851ed5dcc31ecc4a41b086cf4280adc611a079f5dbde1565d44581108e0af8d6674669541"},
}

// doppel11Schema is the schema 1.1's migrations leave, written from SPEC
// §19.3 on its own, so that a test of the store's own baseline against it
// compares two independent accounts of one fact.
const doppel11Schema = `
CREATE TABLE _sqlx_migrations (
    version        BIGINT PRIMARY KEY,
    description    TEXT NOT NULL,
    installed_on   TIMESTAMPTZ NOT NULL DEFAULT now(),
    success        BOOLEAN NOT NULL,
    checksum       BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
);
CREATE TABLE configurations (
    name       TEXT PRIMARY KEY,
    revision   BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    settings   JSONB NOT NULL
);
CREATE TABLE proxies (
    config   TEXT NOT NULL REFERENCES configurations (name) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    ordinal  INTEGER NOT NULL,
    document JSONB NOT NULL,
    PRIMARY KEY (config, name)
);
CREATE TABLE templates (
    config  TEXT NOT NULL,
    proxy   TEXT NOT NULL,
    file    TEXT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (config, proxy, file)
);`

// Doppel11 makes the empty database at url exactly what Doppel 1.1 leaves
// once it has migrated it: its three tables and sqlx's ledger holding its
// five migrations, installed a day ago.
func Doppel11(t testing.TB, url string) {
	t.Helper()
	ctx, conn := connect(t, url)
	if _, err := conn.Exec(ctx, doppel11Schema); err != nil {
		t.Fatalf("pgtest: 1.1's schema: %v", err)
	}
	for _, m := range Doppel11Ledger {
		sum, _ := hex.DecodeString(m.Checksum)
		if _, err := conn.Exec(ctx, `INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, execution_time)
			VALUES ($1, $2, now() - interval '1 day', TRUE, $3, $4)`, m.Version, m.Description, sum, 1000000+m.Version); err != nil {
			t.Fatalf("pgtest: 1.1's ledger: %v", err)
		}
	}
}

// Catalog is what a database's schema is, in lines that compare: every
// column of every table in order (by position among the live columns, as
// a column dropped and added again leaves gaps), every constraint and
// every index.
func Catalog(t testing.TB, url string) []string {
	t.Helper()
	return lines(t, url, `
SELECT 'column ' || table_name || ' ' || row_number() OVER (PARTITION BY table_name ORDER BY ordinal_position)
       || ' ' || column_name || ' ' || data_type || ' null=' || is_nullable || ' default=' || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
UNION ALL
SELECT 'index ' || tablename || ' ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
ORDER BY 1`)
}

// Ledger is every row of sqlx's ledger, every column.
func Ledger(t testing.TB, url string) []string {
	t.Helper()
	return lines(t, url, `SELECT version || ' ' || description || ' ' || installed_on || ' ' || success || ' '
		|| encode(checksum, 'hex') || ' ' || execution_time FROM _sqlx_migrations ORDER BY version`)
}

func lines(t testing.TB, url, query string) []string {
	t.Helper()
	ctx, conn := connect(t, url)
	rows, err := conn.Query(ctx, query)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return out
}

// connect is a connection to url and a context bounding what it does,
// both ended when t ends.
func connect(t testing.TB, url string) (context.Context, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ctx, conn
}

// Exec runs one statement on the database at url.
func Exec(t testing.TB, url, sql string, args ...any) {
	t.Helper()
	ctx, conn := connect(t, url)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}
