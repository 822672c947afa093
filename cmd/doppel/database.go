package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/postgres"
	"github.com/spf13/cobra"
)

// databaseFlags are the flags of the commands that always talk to
// PostgreSQL (push, pull, migrate).
type databaseFlags struct {
	url, name string
}

func (f *databaseFlags) register(cmd *cobra.Command, withName bool) {
	cmd.Flags().StringVar(&f.url, "database-url", "", "PostgreSQL URL (env "+store.EnvDatabaseURL+"); required")
	if withName {
		cmd.Flags().StringVar(&f.name, "config-name", store.DefaultConfigName, "which configuration (env "+store.EnvConfigName+")")
	}
}

func (f *databaseFlags) resolve(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("database-url") {
		f.url = strings.TrimSpace(os.Getenv(store.EnvDatabaseURL))
	}
	if f.url == "" {
		return usage("--database-url (or %s) is required", store.EnvDatabaseURL)
	}
	if cmd.Flags().Lookup("config-name") != nil && !cmd.Flags().Changed("config-name") {
		if v := strings.TrimSpace(os.Getenv(store.EnvConfigName)); v != "" {
			f.name = v
		}
	}
	return nil
}

func openDatabase(ctx context.Context, url, name string) (*postgres.Store, error) {
	s, err := postgres.Open(ctx, url, name, "")
	if err != nil {
		return nil, failed("%v", err)
	}
	return s, nil
}

func newMigrateCmd() *cobra.Command {
	var f databaseFlags
	var status bool
	cmd := &cobra.Command{
		Use: "migrate",
		Example: `  doppel config migrate --database-url postgres://doppel@db/doppel
  doppel config migrate --database-url postgres://doppel@db/doppel --status`,
		Short: "Apply the database migrations embedded in this binary",
		Long: `Apply the database migrations embedded in this binary; running it again applies none.

The schema and its ledger (_sqlx_migrations) are Doppel 1.1's: an empty
database gets 1.1's schema and its five ledger rows, then this binary's own
migrations (6 and up, in tables of their own); a database 1.1 migrated gets
this binary's migrations only; one in the layout of an earlier Doppel in Go
(ledger doppel_migrations) is moved to 1.1's layout, nothing lost. It prints
"applied K migrations; N migrations in total" or "already up to date; ...".
A database whose ledger cannot be followed (half-migrated by 1.1, a failed or
changed migration) is not written to: every reason on stderr, exit 1.

With --status nothing is changed: "schema version N; K migrations applied",
one line per missing, failed, changed or unknown migration, and a last line,
"up to date" (exit 0) or "run ` + "`doppel config migrate`" + `" (exit 1). A migration
this binary does not know (a newer binary's) is reported without failing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolve(cmd); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := openDatabase(ctx, f.url, "")
			if err != nil {
				return err
			}
			defer db.Close()
			var r postgres.Report
			if status {
				r, err = postgres.Status(ctx, db.Pool())
			} else {
				r, err = postgres.Migrate(ctx, db.Pool())
			}
			var refused *postgres.Refused
			if errors.As(err, &refused) {
				return failed("%s", strings.Join(refused.Lines, "\n"))
			}
			if err != nil {
				return failed("%v", err)
			}
			if err := write(cmd, strings.Join(r.Lines, "\n")+"\n"); err != nil {
				return err
			}
			if r.Behind {
				return rejected
			}
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().BoolVar(&status, "status", false, "report, change nothing")
	return cmd
}

func newPushCmd() *cobra.Command {
	var f databaseFlags
	var path, ifRevision string
	cmd := &cobra.Command{
		Use: "push",
		Example: `  doppel config push --config main.yaml --database-url postgres://doppel@db/doppel
  doppel config push --config main.yaml --database-url postgres://doppel@db/doppel --config-name staging --if-revision 3f2a9c1d0b7e4a56`,
		Short: "Validate a YAML document and write it to PostgreSQL",
		Long: `Validate a YAML document and write it to PostgreSQL as configuration --config-name.

Unconditional, unless --if-revision HEX: then it is written only if the stored
configuration's revision is HEX. Prints "pushed: revision <hex>" last.
A refused push (violations, a stale --if-revision, a configuration that does
not exist) says why on stderr and exits 1, as Doppel 1.1 does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolve(cmd); err != nil {
				return err
			}
			var expected *config.Revision
			if cmd.Flags().Changed("if-revision") {
				rev, err := config.ParseRevision(ifRevision)
				if err != nil {
					return usage("--if-revision: %v", err)
				}
				expected = &rev
			}
			if path == "" {
				return usage("--config is required")
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return failed("cannot read the configuration: %v", err)
			}
			doc, err := config.Load(src)
			if err != nil {
				var inv *config.Invalid
				if errors.As(err, &inv) {
					// On stderr, as 1.1 does (SPEC §19.2): a refused push
					// is a failure, not this command's output.
					fmt.Fprint(cmd.ErrOrStderr(), strings.Join(inv.Lines(), "\n")+"\n")
					return rejected
				}
				return failed("%v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := openDatabase(ctx, f.url, f.name)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := postgres.CheckMigrated(ctx, db.Pool()); err != nil {
				return failed("%v", err)
			}
			var rev config.Revision
			if expected == nil {
				rev, err = db.Put(ctx, doc)
			} else {
				rev, err = db.Save(ctx, doc, *expected)
			}
			// Said on stderr, as 1.1 does (SPEC §19.2).
			if errors.Is(err, store.ErrNotFound) {
				return failed("not pushed: the configuration `%s` does not exist, so --if-revision has nothing to compare with", f.name)
			}
			if errors.Is(err, store.ErrRevisionMismatch) {
				return failed("not pushed: the stored configuration `%s` is not at revision %s", f.name, *expected)
			}
			if err != nil {
				return failed("%v", err)
			}
			return write(cmd, "pushed: revision "+string(rev)+"\n")
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&path, "config", "", "the YAML document to push (required)")
	cmd.Flags().StringVar(&ifRevision, "if-revision", "", "write only if the stored revision is this one (16 hex digits)")
	return cmd
}

func newPullCmd() *cobra.Command {
	var f databaseFlags
	var output string
	cmd := &cobra.Command{
		Use: "pull",
		Example: `  doppel config pull --database-url postgres://doppel@db/doppel --output main.yaml
  doppel config pull --database-url postgres://doppel@db/doppel --config-name staging`,
		Short: "Print a configuration stored in PostgreSQL as canonical YAML",
		Long: `Print configuration --config-name, stored in PostgreSQL, as canonical YAML, on
stdout or into --output. Pushing it back yields the same revision. A missing
name fails without creating the output file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolve(cmd); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := openDatabase(ctx, f.url, f.name)
			if err != nil {
				return err
			}
			defer db.Close()
			src, err := db.Source(ctx)
			if err != nil {
				return failed("%v", err)
			}
			doc, err := config.Parse(src)
			if err != nil {
				return failed("the stored configuration does not parse:\n%v", err)
			}
			out, err := config.Canonical(doc)
			if err != nil {
				return failed("%v", err)
			}
			if output == "" {
				return write(cmd, string(out))
			}
			tmp, err := os.CreateTemp(filepath.Dir(output), ".pull-")
			if err != nil {
				return failed("%v", err)
			}
			defer os.Remove(tmp.Name())
			if _, err := tmp.Write(out); err != nil {
				tmp.Close()
				return failed("%v", err)
			}
			if err := tmp.Close(); err != nil {
				return failed("%v", err)
			}
			if err := os.Rename(tmp.Name(), output); err != nil {
				return failed("%v", err)
			}
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&output, "output", "", "write here instead of stdout")
	return cmd
}
