package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/doppelproxy/doppel/client"
	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

func newMocksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mocks",
		Short: "Work with a proxy's mocks over the admin API",
	}
	cmd.AddCommand(newMocksRecordCmd())
	return cmd
}

func newMocksRecordCmd() *cobra.Command {
	var a adminFlags
	var proxy, match, session, since string
	var apply bool
	cmd := &cobra.Command{
		Use:   "record",
		Short: "Turn the journal's forwarded exchanges of a proxy into mocks, printed as YAML",
		Long: `Reads what the request journal kept of a proxy's forwarded exchanges and makes one mock per
method and path, the latest answer winning (the admin API's recording). Without
--apply the mocks are printed and nothing changes; with --apply they are appended to the
proxy (compare-and-swap on the revision read just before) and the mocks added are printed.`,
		Example: `  doppel mocks record --admin http://127.0.0.1:8081 --proxy shop --match '^/catalog' > recorded.yaml
  doppel mocks record --admin http://127.0.0.1:8081 --token "$TOKEN" --proxy shop --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			if proxy == "" {
				return usage("--proxy is required: the proxy whose exchanges are recorded")
			}
			c := a.client()
			rec := client.Recording{Match: match, Session: session, Since: since}
			var mocks []client.Mock
			var exchanges int
			var message string
			var replicas client.ReplicasAnswered
			if apply {
				// The revision read just before, for the compare-and-swap,
				// and the mocks the proxy has, to print only those added.
				cur, revision, err := c.Proxy(cmd.Context(), proxy)
				if err != nil {
					return a.failure(err, "a proxy")
				}
				out, err := c.ApplyRecording(cmd.Context(), proxy, revision, rec)
				if err != nil {
					return a.failure(err, "a recording")
				}
				exchanges, message, replicas = out.Exchanges, out.Message, out.Replicas
				if out.Revision != "" { // applied: the mocks it did not have before
					for _, m := range out.Proxy.Mocks {
						if !slices.ContainsFunc(cur.Mocks, func(b client.Mock) bool { return b.Name == m.Name }) {
							mocks = append(mocks, m)
						}
					}
				}
			} else {
				out, err := c.Record(cmd.Context(), proxy, rec)
				if err != nil {
					return a.failure(err, "a recording")
				}
				mocks, exchanges, message, replicas = out.Mocks, out.Exchanges, out.Message, out.Replicas
			}
			list, err := mockList(mocks)
			if err != nil {
				return failed("the recorded mocks do not convert to JSON: %v", err)
			}
			if a.output == "json" {
				return write(cmd, string(list)+"\n")
			}
			if len(mocks) == 0 {
				msg := message
				if msg == "" {
					msg = "nothing to record"
				}
				return write(cmd, "# "+msg+"\nmocks: []\n")
			}
			y, err := yaml.JSONToYAML(list)
			if err != nil {
				return failed("the recorded mocks do not convert to YAML: %v", err)
			}
			what := "recorded"
			if apply {
				what = "added to proxy " + proxy
			}
			head := "# " + count(len(mocks), "mock") + " " + what
			if exchanges > 0 {
				head += ", from " + count(exchanges, "exchange")
			}
			if message != "" {
				head += "\n# " + message
			}
			var b strings.Builder
			b.WriteString(head + "\n")
			if isFleet(replicas) {
				fmt.Fprintf(&b, "# from the journals of %d replicas: %s\n", len(replicas.Answered), strings.Join(replicas.Answered, ", "))
				sayMissing(&b, replicas, "# ")
			}
			return write(cmd, b.String()+string(y))
		},
	}
	a.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&proxy, "proxy", "", "the proxy whose exchanges are recorded (required)")
	fs.StringVar(&match, "match", "", "only exchanges whose path this regular expression matches")
	fs.StringVar(&session, "session", "", "only this session's exchanges")
	fs.StringVar(&since, "since", "", "only exchanges after this RFC 3339 time or journal entry id")
	fs.BoolVar(&apply, "apply", false, "append the mocks to the proxy instead of only printing them")
	return cmd
}

// mockList is {"mocks": [...]} with every object's keys in order, as
// Doppel writes a recording: the same mocks print the same.
func mockList(mocks []client.Mock) ([]byte, error) {
	if mocks == nil {
		mocks = []client.Mock{}
	}
	typed, err := json.Marshal(map[string]any{"mocks": mocks})
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(typed, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// count is "1 mock", "2 mocks".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
