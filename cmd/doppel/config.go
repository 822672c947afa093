package main

import (
	"errors"
	"os"
	"strings"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check, print and move configurations",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usage("a config subcommand is required")
		},
	}
	cmd.AddCommand(newValidateCmd(), newSchemaCmd())
	return cmd
}

func newValidateCmd() *cobra.Command {
	var flags storeFlags
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a configuration and list every violation, one per line with its path",
		Long: `Check a configuration and list every violation, one per line with its path.

Prints "configuration is valid" and exits 0 when there is nothing to report;
otherwise prints each violation on stdout and exits 1. What stopped it from
looking (an unreadable file) goes to stderr. It reads the document and
nothing else.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := flags.options(cmd)
			if err != nil {
				return err
			}
			src, err := readDocument(opts)
			if err != nil {
				return err
			}
			if _, err := config.Load(src); err != nil {
				var inv *config.Invalid
				if !errors.As(err, &inv) {
					return failed("%v", err)
				}
				if err := write(cmd, strings.Join(inv.Lines(), "\n")+"\n"); err != nil {
					return err
				}
				return rejected
			}
			return write(cmd, "configuration is valid\n")
		},
	}
	flags.register(cmd)
	return cmd
}

// readDocument reads the stored document's bytes.
func readDocument(opts store.Options) ([]byte, error) {
	if opts.Kind == store.KindPostgres {
		return nil, failed("the postgres store is not available in this build yet; use --store file")
	}
	src, err := os.ReadFile(opts.ConfigPath)
	if err != nil {
		return nil, failed("cannot read the configuration: %v", err)
	}
	return src, nil
}

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the configuration's JSON Schema (2020-12); reads nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return write(cmd, string(config.Schema()))
		},
	}
}
