// Command doppel is an HTTP reverse proxy for testing the clients of a
// backend against one that is slow, drops requests, or is partly mocked.
// This file and its neighbours hold flags and wiring only.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/doppelproxy/doppel/internal/version"
	"github.com/spf13/cobra"
)

// Exit codes: 0 ok, 1 rejected or failed, 2 usage.
const (
	exitOK       = 0
	exitRejected = 1
	exitUsage    = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitError carries an exit code out of a command. Everything a command's
// RunE returns that is not an exitError is a usage error: cobra's own
// errors (unknown command, bad flag) are all of that kind.
type exitError struct {
	code int
	err  error // printed on stderr; nil when the command printed already
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// failed reports what stopped a command (stderr, exit 1).
func failed(format string, args ...any) error {
	return &exitError{code: exitRejected, err: fmt.Errorf(format, args...)}
}

// write prints a command's result; a failed write is a failure, not usage.
func write(cmd *cobra.Command, s string) error {
	if _, err := io.WriteString(cmd.OutOrStdout(), s); err != nil {
		return failed("writing the output: %v", err)
	}
	return nil
}

// rejected is a command that already printed why on stdout (exit 1).
var rejected = &exitError{code: exitRejected}

// usage is a usage error raised by a command itself (exit 2).
func usage(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitUsage, err: err}
	}
	if ee.err != nil {
		fmt.Fprintf(stderr, "doppel: %v\n", ee.err)
	}
	if ee.code == exitUsage {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprint(stderr, cmd.UsageString())
	}
	return ee.code
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "doppel",
		Short: "An HTTP reverse proxy that injects faults and answers from mocks",
		Long: `Doppel stands in front of a real backend, or in place of one that does not
exist yet, so that its clients can be tested against a backend that is slow,
drops requests, or is partly mocked.`,
		Example: `  doppel serve --config examples/main.yaml
  doppel config validate --config main.yaml
  doppel completion bash > /etc/bash_completion.d/doppel`,
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usage("a command is required")
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// `doppel --version` prints what `doppel version` does.
	root.SetVersionTemplate("doppel {{.Version}}\n")
	// `doppel completion bash|zsh|fish|powershell` is cobra's own.
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usage("%v", err)
	})
	root.AddCommand(newServeCmd(stdout), newVersionCmd(), newConfigCmd(), newTokenCmd(), newRequestsCmd(), newSessionsCmd(), newCountersCmd(), newMocksCmd(), newReplicasCmd())
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		// Without a shell, or with one cobra does not know, it is a usage
		// error, not help and success.
		c.Args = cobra.NoArgs
		c.RunE = func(*cobra.Command, []string) error {
			return usage("completion needs a shell: bash, zsh, fish or powershell")
		}
		c.Example = "  doppel completion bash > ~/.local/share/bash-completion/completions/doppel\n  doppel completion zsh > \"${fpath[1]}/_doppel\"\n  doppel completion fish > ~/.config/fish/completions/doppel.fish"
	}
	return root
}
