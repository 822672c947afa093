package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// readJSONFile reads --file: a path, or - for standard input.
func readJSONFile(cmd *cobra.Command, file, what string) ([]byte, error) {
	var body []byte
	var err error
	switch file {
	case "":
		return nil, usage("--file is required: the %s as JSON, or - for stdin", what)
	case "-":
		body, err = io.ReadAll(cmd.InOrStdin())
	default:
		body, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, failed("reading the %s: %v", what, err)
	}
	return body, nil
}

func newSessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Create, list and end the sessions of a running Doppel",
		Long: `A session lays mocks and faults over proxies for the requests carrying its id
in X-Doppel-Session only (docs/sessions.md): one suite's faults, no one else's.`,
		Example: `  SESSION=$(doppel sessions create --admin http://127.0.0.1:8081 --token "$TOKEN" --file session.json)
  curl -H "X-Doppel-Session: $SESSION" http://127.0.0.1:8080/catalog
  doppel sessions end --admin http://127.0.0.1:8081 --token "$TOKEN" "$SESSION"`,
	}
	cmd.AddCommand(newSessionsCreateCmd(), newSessionsListCmd(), newSessionsEndCmd())
	return cmd
}

func newSessionsCreateCmd() *cobra.Command {
	var a adminFlags
	var file string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a session from a JSON body and print its id",
		Example: `  doppel sessions create --admin http://127.0.0.1:8081 --file session.json
  echo '{"ttl": 300, "proxies": {"shop": {"loss": {"percentage": 1.0, "status": 503}}}}' |
    doppel sessions create --admin http://127.0.0.1:8081 --file -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			body, err := readJSONFile(cmd, file, "session")
			if err != nil {
				return err
			}
			s, err := a.client().CreateSessionJSON(cmd.Context(), body)
			if err != nil {
				return a.failure(err, "a session")
			}
			if a.output == "json" {
				return a.printRaw(cmd)
			}
			// The id alone, so that a script can take it as it is.
			return write(cmd, s.ID+"\n")
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&file, "file", "", "the session as JSON ({\"ttl\", \"proxies\"}), or - for stdin")
	return cmd
}

func newSessionsListCmd() *cobra.Command {
	var a adminFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the live sessions, soonest to expire first",
		Example: `  doppel sessions list --admin http://127.0.0.1:8081 --token "$TOKEN"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			sessions, err := a.client().Sessions(cmd.Context())
			if err != nil {
				return a.failure(err, "a list of sessions")
			}
			if a.output == "json" {
				return a.printRaw(cmd)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPROXIES\tEXPIRES\tTTL")
			for _, s := range sessions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%ds\n", s.ID, strings.Join(s.Proxies, ","), apiTime(s.ExpiresAt), s.TTL)
			}
			if err := tw.Flush(); err != nil {
				return failed("writing the output: %v", err)
			}
			return nil
		},
	}
	a.register(cmd)
	return cmd
}

func newSessionsEndCmd() *cobra.Command {
	var a adminFlags
	cmd := &cobra.Command{
		Use:     "end ID",
		Short:   "End a session now",
		Example: `  doppel sessions end --admin http://127.0.0.1:8081 --token "$TOKEN" Yq3v0c0bQvS9k5Zr3m0xkA`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			if err := a.client().DeleteSession(cmd.Context(), args[0]); err != nil {
				return a.failure(err, "")
			}
			if a.output == "json" {
				return write(cmd, `{"ended":`+jsonString(args[0])+"}\n")
			}
			return write(cmd, "ended: "+args[0]+"\n")
		},
	}
	a.register(cmd)
	return cmd
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func newCountersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "counters",
		Short: "List and reset what a proxy's fault conditions (when) have counted",
		Example: `  doppel counters list --admin http://127.0.0.1:8081 --proxy shop
  doppel counters reset --admin http://127.0.0.1:8081 --proxy shop --session "$SESSION"`,
	}
	cmd.AddCommand(newCountersListCmd(), newCountersResetCmd())
	return cmd
}

// needProxy refuses a counters command without --proxy.
func needProxy(proxy string) error {
	if proxy == "" {
		return usage("--proxy is required: whose counters")
	}
	return nil
}

// apiTime is a time as the API writes it: RFC 3339 in UTC, to the
// nanosecond without trailing zeros.
func apiTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func newCountersListCmd() *cobra.Command {
	var a adminFlags
	var proxy, session string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List a proxy's counters, oldest first",
		Example: `  doppel counters list --admin http://127.0.0.1:8081 --proxy shop -o json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			if err := needProxy(proxy); err != nil {
				return err
			}
			counters, err := a.client().Counters(cmd.Context(), proxy, session)
			if err != nil {
				return a.failure(err, "a list of counters")
			}
			if a.output == "json" {
				return a.printRaw(cmd)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FAULT\tMOCK\tKEY\tCOUNT\tFIRST SEEN")
			for _, c := range counters {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", c.Fault, cmpDash(c.Mock), cmpDash(c.Key), c.Count, apiTime(c.FirstSeen))
			}
			if err := tw.Flush(); err != nil {
				return failed("writing the output: %v", err)
			}
			return nil
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&proxy, "proxy", "", "the proxy whose counters (required)")
	cmd.Flags().StringVar(&session, "session", "", "a session's own counters of that proxy")
	return cmd
}

func newCountersResetCmd() *cobra.Command {
	var a adminFlags
	var proxy, session string
	cmd := &cobra.Command{
		Use:     "reset",
		Short:   "Start a proxy's counters (and the seed's attempts) again",
		Example: `  doppel counters reset --admin http://127.0.0.1:8081 --proxy shop`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			if err := needProxy(proxy); err != nil {
				return err
			}
			if err := a.client().ResetCounters(cmd.Context(), proxy, session); err != nil {
				return a.failure(err, "")
			}
			if a.output == "json" {
				return write(cmd, `{"reset":`+jsonString(proxy)+"}\n")
			}
			return write(cmd, "reset: the counters of "+proxy+"\n")
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&proxy, "proxy", "", "the proxy whose counters (required)")
	cmd.Flags().StringVar(&session, "session", "", "a session's own counters of that proxy")
	return cmd
}
