package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/control"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "config",
		Example: `  doppel config validate --config main.yaml
  doppel config schema > doppel-config.schema.json`,
		Short: "Check, print and move configurations",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usage("a config subcommand is required")
		},
	}
	cmd.AddCommand(newValidateCmd(), newSchemaCmd(), newReloadCmd(), newMigrateCmd(), newPushCmd(), newPullCmd())
	return cmd
}

func newValidateCmd() *cobra.Command {
	var flags storeFlags
	cmd := &cobra.Command{
		Use: "validate",
		Example: `  doppel config validate --config main.yaml
  doppel config validate --store postgres --database-url "$DOPPEL_DATABASE_URL"`,
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
				if err := write(cmd, strings.Join(violationLines(inv, configPathOf(opts)), "\n")+"\n"); err != nil {
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

// violationLines are the printed violations of a document read from file
// ("" for the database): one about the whole document, without a path of
// its own (a YAML syntax error, an empty file), names the file instead.
func violationLines(inv *config.Invalid, file string) []string {
	lines := inv.Lines()
	for i, v := range inv.Violations {
		if v.Path == "" && file != "" {
			lines[i] = file + ": " + lines[i]
		}
	}
	return lines
}

// readDocument reads the stored document's bytes, from the file or the
// database the store flags name.
func readDocument(opts store.Options) ([]byte, error) {
	if opts.Kind == store.KindPostgres {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db, err := openDatabase(ctx, opts.DatabaseURL, opts.ConfigName)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		src, err := db.Source(ctx)
		if err != nil {
			return nil, failed("%v", err)
		}
		return src, nil
	}
	src, err := os.ReadFile(opts.ConfigPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, failed("there is no configuration at %s: point --config (or %s) at one, for example --config examples/main.yaml from the repository, or write one (docs/getting-started.md)",
			opts.ConfigPath, store.EnvConfigPath)
	}
	if err != nil {
		return nil, failed("cannot read the configuration: %v", err)
	}
	return src, nil
}

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "schema",
		Example: `  doppel config schema > doppel-config.schema.json`,
		Short:   "Print the configuration's JSON Schema (2020-12); reads nothing",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return write(cmd, string(config.Schema()))
		},
	}
}

func newReloadCmd() *cobra.Command {
	var flags storeFlags
	var socket string
	cmd := &cobra.Command{
		Use: "reload",
		Example: `  doppel config reload --config main.yaml
  doppel config reload --socket /tmp/doppel.sock`,
		Short: "Make a running doppel serve reload its configuration",
		Long: `Make a running doppel serve reload its configuration, over the control socket.

Prints "reloaded: revision <hex>, <n> proxies" (and a "note:" line naming the
sections that need a restart), or "reload rejected: CONFIG_INVALID" and every
violation, the running configuration untouched (exit 1). Without --socket the
socket's path is read from the configuration (control.socket).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := socketPath(cmd, &flags, socket)
			if err != nil {
				return err
			}
			resp, err := control.Call(path, control.Request{Command: "reload"})
			if err != nil {
				return failed("%v", err)
			}
			if !resp.OK {
				return refusal(cmd, "reload rejected", resp)
			}
			out := fmt.Sprintf("reloaded: revision %s, %d proxies\n", resp.Revision, resp.Proxies)
			if len(resp.Unapplied) > 0 {
				out += "note: restart needed for: " + strings.Join(resp.Unapplied, ", ") + "\n"
			}
			return write(cmd, out)
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&socket, "socket", "", "the control socket; when set, no configuration is read")
	return cmd
}

// socketPath is --socket, else the configuration's control.socket.
func socketPath(cmd *cobra.Command, flags *storeFlags, socket string) (string, error) {
	if socket != "" {
		return socket, nil
	}
	opts, err := flags.options(cmd)
	if err != nil {
		return "", err
	}
	src, err := readDocument(opts)
	if err != nil {
		return "", err
	}
	doc, err := config.Parse(src)
	if err != nil {
		var inv *config.Invalid
		if errors.As(err, &inv) {
			return "", failed("the configuration does not parse, so its control.socket is unknown (pass --socket):\n%s", strings.Join(inv.Lines(), "\n"))
		}
		return "", failed("%v", err)
	}
	return string(doc.Control.Socket), nil
}

// refusal prints a command the server refused: what it found goes to
// stdout, and the exit status is 1.
func refusal(cmd *cobra.Command, what string, resp *control.Response) error {
	out := fmt.Sprintf("%s: %s\n", what, resp.Code)
	if resp.Message != "" && len(resp.Violations) == 0 {
		out += resp.Message + "\n"
	}
	for _, v := range resp.Violations {
		out += v + "\n"
	}
	if err := write(cmd, out); err != nil {
		return err
	}
	return rejected
}
