package pgtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestURL(t *testing.T) {
	ctx := context.Background()
	var names []string
	var lingering *pgx.Conn
	t.Run("fresh databases", func(t *testing.T) {
		for range 2 {
			conn, err := pgx.Connect(ctx, URL(t))
			if err != nil {
				t.Fatal(err)
			}
			var name string
			var tables int
			err = conn.QueryRow(ctx, `SELECT current_database(),
				(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast'))`).Scan(&name, &tables)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, prefix) || tables != 0 {
				t.Fatalf("database %q holds %d relations; want a fresh %s* one", name, tables, prefix)
			}
			names = append(names, name)
			if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
				t.Fatal(err)
			}
			var x int
			if err := conn.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
				t.Fatalf("read back %d, %v", x, err)
			}
			// Left open: the drop must not wait for it.
			lingering = conn
		}
		if names[0] == names[1] {
			t.Fatalf("two calls gave the same database %s", names[0])
		}
	})
	if len(names) != 2 {
		if t.Failed() {
			return
		}
		t.Skip("no PostgreSQL server")
	}
	if lingering != nil {
		_ = lingering.Close(ctx)
	}

	admin, err := pgx.Connect(ctx, os.Getenv(EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, name := range names {
		var exists bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Errorf("database %s still exists after its test's cleanup", name)
		}
	}
}

// outcomeTB records how URL gave up instead of giving up itself.
type outcomeTB struct {
	testing.TB
	fatal, skip string
}

func (f *outcomeTB) Helper()                        {}
func (f *outcomeTB) Fatal(args ...any)              { f.fatal = sprint(args); runtime.Goexit() }
func (f *outcomeTB) Fatalf(format string, a ...any) { f.fatal = sprintf(format, a); runtime.Goexit() }
func (f *outcomeTB) Skip(args ...any)               { f.skip = sprint(args); runtime.Goexit() }
func (f *outcomeTB) Skipf(format string, a ...any)  { f.skip = sprintf(format, a); runtime.Goexit() }

func TestURLWithoutServer(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv(EnvURL, "")
			t.Setenv("CI", ci)
			f := &outcomeTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				URL(f)
				t.Error("URL returned without a server")
			}()
			<-done
			if ci == "" && (f.skip == "" || f.fatal != "") {
				t.Fatalf("outside CI: skip %q, fatal %q; want a skip", f.skip, f.fatal)
			}
			if ci != "" && (f.fatal == "" || f.skip != "") {
				t.Fatalf("in CI: skip %q, fatal %q; want a failure", f.skip, f.fatal)
			}
			if msg := f.skip + f.fatal; !strings.Contains(msg, EnvURL) || !strings.Contains(msg, "make test") {
				t.Errorf("message %q names neither the variable nor `make test`", msg)
			}
		})
	}
}

func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ base, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/doppel_test_x?sslmode=disable"},
		{"postgresql://u:p%40ss@db.example:6543?sslmode=require", "postgresql://u:p%40ss@db.example:6543/doppel_test_x?sslmode=require"},
		{"postgres://u@h/postgres?dbname=other&sslmode=disable", "postgres://u@h/doppel_test_x?sslmode=disable"},
		{"host=/tmp user=postgres dbname=postgres", "host=/tmp user=postgres dbname=postgres dbname=doppel_test_x"},
	} {
		got, err := withDatabase(c.base, "doppel_test_x")
		if err != nil || got != c.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", c.base, got, err, c.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil || cfg.Database != "doppel_test_x" {
			t.Errorf("%q parses to database %q, %v", got, cfg.Database, err)
		}
	}
}

func sprint(args []any) string                 { return fmt.Sprint(args...) }
func sprintf(format string, args []any) string { return fmt.Sprintf(format, args...) }
