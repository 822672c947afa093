package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/doppelproxy/doppel/internal/store"
	"github.com/spf13/cobra"
)

// storeFlags are the flags every command that reads a configuration takes
// (SPEC §10.1). Each falls back to its environment variable, then to its
// default: flag beats environment beats default.
type storeFlags struct {
	kind, configPath, databaseURL, configName string
}

func (f *storeFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.kind, "store", string(store.KindFile), "where the configuration lives: file or postgres (env "+store.EnvStore+")")
	fs.StringVar(&f.configPath, "config", store.DefaultConfigPath, "the YAML document, with the file store (env "+store.EnvConfigPath+")")
	fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL, required with the postgres store (env "+store.EnvDatabaseURL+")")
	fs.StringVar(&f.configName, "config-name", store.DefaultConfigName, "which configuration, with the postgres store (env "+store.EnvConfigName+")")
}

// options resolves the flags against the environment and checks them.
func (f *storeFlags) options(cmd *cobra.Command) (store.Options, error) {
	pick := func(flag, env, value string) string {
		if cmd.Flags().Changed(flag) {
			return value
		}
		if v := strings.TrimSpace(os.Getenv(env)); v != "" {
			return v
		}
		return value
	}
	o := store.Options{
		Kind:        store.Kind(pick("store", store.EnvStore, f.kind)),
		ConfigPath:  pick("config", store.EnvConfigPath, f.configPath),
		DatabaseURL: pick("database-url", store.EnvDatabaseURL, f.databaseURL),
		ConfigName:  pick("config-name", store.EnvConfigName, f.configName),
	}
	// 1.1 refuses a postgres store with no URL once its arguments parsed,
	// exit 1 with no usage: a missing setting, not a misspelt command.
	if o.Kind == store.KindPostgres && o.DatabaseURL == "" {
		return o, failed("--database-url (or %s) is required with --store postgres", store.EnvDatabaseURL)
	}
	if err := o.Check(); err != nil {
		return o, usage("%v", err)
	}
	return o, nil
}

// servedName names the configuration opts select as a running Doppel
// reports it on its control socket, so that reload and token add reach
// the Doppel serving the configuration they name and no other: a file by
// its absolute path (links resolved), a database's by its configuration
// and database names. It never carries a secret; "" when it cannot be
// told (a database URL that does not parse), which skips the check.
func servedName(o store.Options) string {
	if o.Kind == store.KindPostgres {
		cfg, err := pgconn.ParseConfig(o.DatabaseURL)
		if err != nil {
			return ""
		}
		return fmt.Sprintf("the configuration %q of the PostgreSQL database %q", o.ConfigName, cfg.Database)
	}
	abs, err := filepath.Abs(o.ConfigPath)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return "the file " + abs
}

// namesDocument reports whether a flag or the environment names the
// configuration, rather than the default ./main.yaml: the postgres store
// (chosen by a flag or DOPPEL_CONFIG_STORE, never by default), or a
// --config (or DOPPEL_CONFIG_PATH) for the file store.
func (f *storeFlags) namesDocument(cmd *cobra.Command, o store.Options) bool {
	if o.Kind == store.KindPostgres {
		return true
	}
	return cmd.Flags().Changed("config") || strings.TrimSpace(os.Getenv(store.EnvConfigPath)) != ""
}
