// Package pgtest gives PostgreSQL tests a database of their own.
//
// The server is named by DOPPEL_TEST_DATABASE_URL, which `make test` always
// sets (scripts/with-postgres.sh: the caller's server, one on
// 127.0.0.1:5432, or a throwaway cluster). Without it the tests skip, except
// under CI, where they fail: PostgreSQL tests never silently skip in CI.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding the server's URL. The user it names must
// be allowed to create databases.
const EnvURL = "DOPPEL_TEST_DATABASE_URL"

// prefix starts the name of every database URL creates.
const prefix = "doppel_test_"

const timeout = 30 * time.Second

// URL creates a fresh, empty database (from template0) on the server named
// by DOPPEL_TEST_DATABASE_URL and returns the URL of that database. The
// database is dropped, along with any connection still open to it, when t
// and its subtests finish.
func URL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvURL)
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("pgtest: %s is not set and CI is: PostgreSQL tests must not skip in CI; run them through `make test`, which provides a server (scripts/with-postgres.sh)", EnvURL)
		}
		t.Skipf("pgtest: %s is not set; `make test` provides a PostgreSQL server, or set %s to one where the tests may create databases (see docs/storage.md)", EnvURL, EnvURL)
	}

	var b [8]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := exec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := exec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return dbURL
}

// exec runs one statement on its own connection to the server at admin.
func exec(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", EnvURL, err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns the connection string base, in URL or keyword/value
// form, with its database replaced by name.
func withDatabase(base, name string) (string, error) {
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		// Keyword/value form: a later keyword overrides an earlier one.
		return base + " dbname=" + name, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path, u.RawPath = "/"+name, ""
	if q := u.Query(); q.Has("dbname") {
		q.Del("dbname")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
