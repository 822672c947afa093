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
			rec := client.Recording{Match: match, Session: session, Since: since}
			got, err := recordMocks(cmd, &a, proxy, rec, apply)
			if err != nil {
				return err
			}
			return printRecorded(cmd, &a, proxy, apply, got)
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

// recording is what a recording made: the mocks (those added, with
// --apply), from how many exchanges, its note and the replicas read.
type recording struct {
	mocks     []client.Mock
	exchanges int
	message   string
	replicas  client.ReplicasAnswered
}

// recordMocks asks for the recording; with apply, on the revision read
// just before (the compare-and-swap), keeping only the mocks the proxy did
// not have.
func recordMocks(cmd *cobra.Command, a *adminFlags, proxy string, rec client.Recording, apply bool) (recording, error) {
	c := a.client()
	if !apply {
		out, err := c.Record(cmd.Context(), proxy, rec)
		if err != nil {
			return recording{}, a.failure(err, "a recording")
		}
		return recording{out.Mocks, out.Exchanges, out.Message, out.Replicas}, nil
	}
	cur, revision, err := c.Proxy(cmd.Context(), proxy)
	if err != nil {
		return recording{}, a.failure(err, "a proxy")
	}
	out, err := c.ApplyRecording(cmd.Context(), proxy, revision, rec)
	if err != nil {
		return recording{}, a.failure(err, "a recording")
	}
	got := recording{exchanges: out.Exchanges, message: out.Message, replicas: out.Replicas}
	if out.Revision != "" { // applied: the mocks it did not have before
		for _, m := range out.Proxy.Mocks {
			if !slices.ContainsFunc(cur.Mocks, func(b client.Mock) bool { return b.Name == m.Name }) {
				got.mocks = append(got.mocks, m)
			}
		}
	}
	return got, nil
}

// printRecorded prints a recording: JSON with -o json, else YAML under a
// comment saying what was made, from what, and from which replicas.
func printRecorded(cmd *cobra.Command, a *adminFlags, proxy string, apply bool, got recording) error {
	list, err := mockList(got.mocks)
	if err != nil {
		return failed("the recorded mocks do not convert to JSON: %v", err)
	}
	if a.output == "json" {
		return write(cmd, string(list)+"\n")
	}
	if len(got.mocks) == 0 {
		msg := got.message
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
	head := "# " + count(len(got.mocks), "mock") + " " + what
	if got.exchanges > 0 {
		head += ", from " + count(got.exchanges, "exchange")
	}
	if got.message != "" {
		head += "\n# " + got.message
	}
	var b strings.Builder
	b.WriteString(head + "\n")
	if isFleet(got.replicas) {
		fmt.Fprintf(&b, "# from the journals of %d replicas: %s\n", len(got.replicas.Answered), strings.Join(got.replicas.Answered, ", "))
		sayMissing(&b, got.replicas, "# ")
	}
	return write(cmd, b.String()+string(y))
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
