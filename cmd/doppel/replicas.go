package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newReplicasCmd() *cobra.Command {
	var a adminFlags
	cmd := &cobra.Command{
		Use:   "replicas",
		Short: "List the replicas serving the configuration, as the one asked sees them",
		Long: `List the replicas serving the configuration, as the admin API lists them.

With the PostgreSQL store every replica of the configuration name registers
at start and writes a heartbeat every 2 s; one without a heartbeat for 10 s
is lost, and listed as such for 5 minutes. The replica that answered is
marked with *. An instance with the file store lists itself.`,
		Example: `  doppel replicas --admin http://127.0.0.1:8081 --token "$TOKEN"
  doppel replicas --admin http://127.0.0.1:8081 -o json | jq -r '.replicas[] | select(.state == "lost") | .url'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			replicas, err := a.client().Replicas(cmd.Context())
			if err != nil {
				return a.failure(err, "a list of replicas")
			}
			if a.output == "json" {
				return a.printRaw(cmd)
			}
			var b strings.Builder
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tURL\tHOST\tPID\tVERSION\tREVISION\tSTARTED\tSEEN")
			now := time.Now()
			for _, r := range replicas {
				id := r.ID
				if r.Self {
					id += " *"
				}
				started, seen := when(r.StartedAt), when(r.SeenAt)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s ago\n", id, r.State, cmpDash(r.URL), r.Host, r.PID, r.Version, r.Revision,
					started.Local().Format(time.DateTime), max(now.Sub(seen), 0).Round(time.Second))
			}
			_ = tw.Flush()
			return write(cmd, b.String())
		},
	}
	a.register(cmd)
	return cmd
}

// when is an RFC 3339 time of the API's; the zero time when it is not
// one, as a time that did not decode was before.
func when(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// cmpDash is s, or - when it is empty.
func cmpDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
