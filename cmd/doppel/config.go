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
	"github.com/doppelproxy/doppel/internal/store/file"
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
	var strict bool
	cmd := &cobra.Command{
		Use: "validate",
		Example: `  doppel config validate --config main.yaml
  doppel config validate --strict --config main.yaml
  doppel config validate --store postgres --database-url "$DOPPEL_DATABASE_URL"`,
		Short: "Check a configuration and list every violation, one per line with its path",
		Long: `Check a configuration and list every violation, one per line with its path.

Prints "configuration is valid" and exits 0 when there is nothing to refuse;
otherwise prints each violation on stdout and exits 1. Advisories, what is
legal but worth knowing (a template variable nothing binds, a template file
not uploaded yet, an access override that leaves admin out), come first,
each as "advisory: <path>: <text>", and do not change the exit code unless
--strict makes them violations. What stopped it from looking (an
unreadable file) goes to stderr. It reads the document and the template
files it names, and writes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := flags.options(cmd)
			if err != nil {
				return err
			}
			src, st, err := readStored(opts)
			if err != nil {
				return err
			}
			if st != nil {
				defer st.Close()
			}
			doc, err := config.Load(src)
			if err != nil {
				var inv *config.Invalid
				if !errors.As(err, &inv) {
					return failed("%v", err)
				}
				if err := write(cmd, strings.Join(violationLines(inv, configPathOf(opts)), "\n")+"\n"); err != nil {
					return err
				}
				return rejected
			}
			if st == nil {
				if st, err = file.Open(opts.ConfigPath, string(doc.Templates.Dir)); err != nil {
					return failed("%v", err)
				}
			}
			advisories := store.Advisories(context.Background(), st, doc)
			if strict && len(advisories) > 0 {
				if err := write(cmd, strings.Join(advisoryLines(advisories, ""), "\n")+"\n"); err != nil {
					return err
				}
				return rejected
			}
			out := ""
			for _, line := range advisoryLines(advisories, "advisory: ") {
				out += line + "\n"
			}
			return write(cmd, out+"configuration is valid\n")
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "refuse advisories as violations (exit 1)")
	return cmd
}

// readStored reads the stored document's bytes, from the file or the
// database the store flags name; the database stays open, as the store
// of its template files, for the caller to close.
func readStored(opts store.Options) ([]byte, store.Store, error) {
	if opts.Kind != store.KindPostgres {
		src, err := readDocument(opts)
		return src, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := openDatabase(ctx, opts.DatabaseURL, opts.ConfigName)
	if err != nil {
		return nil, nil, err
	}
	src, err := db.Source(ctx)
	if err != nil {
		db.Close()
		return nil, nil, failed("%v", err)
	}
	return src, db, nil
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

Prints "reloaded: revision <hex>, <n> proxies" (tcp proxies are counted, and
said: "3 proxies (1 tcp)"; and a "note:" line naming the sections that need a
restart), or "reload rejected: CONFIG_INVALID" and every violation, the running
configuration untouched (exit 1). Without --socket the socket's path is read
from the configuration (control.socket). The doppel behind the socket must
serve the configuration named (the file's absolute path, or the database and
configuration names); one serving another is left unchanged, and the command
exits 1 saying what it serves. --socket alone skips that check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, serves, err := socketPath(cmd, &flags, socket)
			if err != nil {
				return err
			}
			resp, err := callControl(path, serves, control.Request{Command: "reload"})
			if err != nil {
				return err
			}
			if !resp.OK {
				return refusal(cmd, "reload rejected", resp)
			}
			out := fmt.Sprintf("reloaded: revision %s, %d proxies", resp.Revision, resp.Proxies)
			if resp.TCPProxies > 0 {
				out += fmt.Sprintf(" (%d tcp)", resp.TCPProxies)
			}
			out += "\n"
			if len(resp.Unapplied) > 0 {
				out += "note: restart needed for: " + strings.Join(resp.Unapplied, ", ") + "\n"
			}
			return write(cmd, out)
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&socket, "socket", "", "the control socket; alone, no configuration is read and whichever doppel listens there reloads")
	return cmd
}

// socketPath is the control socket a command talks to, and the
// configuration the Doppel behind it must serve (servedName): --socket
// alone skips that check; with --socket and a document named, or the
// document's own control.socket, it is made.
func socketPath(cmd *cobra.Command, flags *storeFlags, socket string) (path, serves string, err error) {
	opts, err := flags.options(cmd)
	if err != nil {
		return "", "", err
	}
	if socket != "" {
		if !flags.namesDocument(cmd, opts) {
			return socket, "", nil
		}
		return socket, servedName(opts), nil
	}
	src, err := readDocument(opts)
	if err != nil {
		return "", "", err
	}
	doc, err := config.Parse(src)
	if err != nil {
		var inv *config.Invalid
		if errors.As(err, &inv) {
			return "", "", failed("the configuration does not parse, so its control.socket is unknown (pass --socket):\n%s", strings.Join(inv.Lines(), "\n"))
		}
		return "", "", failed("%v", err)
	}
	return string(doc.Control.Socket), servedName(opts), nil
}

// callControl sends req to the socket at path for the configuration
// serves names; a Doppel there serving another is told apart from any
// other refusal: nothing changed, and the message says how to reach the
// right one.
func callControl(path, serves string, req control.Request) (*control.Response, error) {
	req.Serves = serves
	resp, err := control.Call(path, req)
	if err != nil {
		return nil, failed("%v", err)
	}
	if !resp.OK && resp.Code == control.Mismatch && serves != "" && resp.Serves != "" && resp.Serves != serves {
		return nil, failed("the doppel behind the control socket %s serves %s, not %s: nothing was changed.\n"+
			"Reach the doppel serving %s with --socket and its control.socket; if none runs, start it (doppel serve), "+
			"and give each configuration a control.socket of its own.", path, resp.Serves, serves, serves)
	}
	return resp, nil
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
