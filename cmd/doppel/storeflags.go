package main

import (
	"os"
	"strings"

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
	if err := o.Check(); err != nil {
		return o, usage("%v", err)
	}
	return o, nil
}
