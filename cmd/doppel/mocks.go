package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

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
method and path, the latest answer winning (POST /api/v1/proxies/{name}/record). Without
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
			path := "/api/v1/proxies/" + url.PathEscape(proxy)
			req := map[string]any{"match": match, "session": session, "since": since, "apply": apply}
			var before []string
			if apply {
				_, raw, err := a.fetch("GET", path, nil, http.StatusOK)
				if err != nil {
					return err
				}
				var cur struct {
					Revision string `json:"revision"`
					Proxy    struct {
						Mocks []struct {
							Name string `json:"name"`
						} `json:"mocks"`
					} `json:"proxy"`
				}
				if err := json.Unmarshal(raw, &cur); err != nil {
					return failed("the admin API's answer is not a proxy: %v", err)
				}
				req["revision"] = cur.Revision
				for _, m := range cur.Proxy.Mocks {
					before = append(before, m.Name)
				}
			}
			body, _ := json.Marshal(req)
			_, raw, err := a.fetch("POST", path+"/record", body, http.StatusOK)
			if err != nil {
				return err
			}
			var out struct {
				Mocks     []json.RawMessage `json:"mocks"`
				Exchanges int               `json:"exchanges"`
				Message   string            `json:"message"`
				Replicas  fleetAnswer       `json:"replicas"`
				Proxy     *struct {
					Mocks []json.RawMessage `json:"mocks"`
				} `json:"proxy"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				return failed("the admin API's answer is not a recording: %v", err)
			}
			mocks := out.Mocks
			if out.Proxy != nil { // applied: the mocks it did not have before
				mocks = nil
				for _, m := range out.Proxy.Mocks {
					var named struct{ Name string }
					if json.Unmarshal(m, &named) == nil && !slices.Contains(before, named.Name) {
						mocks = append(mocks, m)
					}
				}
			}
			if a.output == "json" {
				list, _ := json.Marshal(map[string]any{"mocks": mocks})
				return write(cmd, string(list)+"\n")
			}
			if len(mocks) == 0 {
				msg := out.Message
				if msg == "" {
					msg = "nothing to record"
				}
				return write(cmd, "# "+msg+"\nmocks: []\n")
			}
			list, _ := json.Marshal(map[string]any{"mocks": mocks})
			y, err := yaml.JSONToYAML(list)
			if err != nil {
				return failed("the recorded mocks do not convert to YAML: %v", err)
			}
			what := "recorded"
			if apply {
				what = "added to proxy " + proxy
			}
			head := "# " + count(len(mocks), "mock") + " " + what
			if out.Exchanges > 0 {
				head += ", from " + count(out.Exchanges, "exchange")
			}
			if out.Message != "" {
				head += "\n# " + out.Message
			}
			var b strings.Builder
			b.WriteString(head + "\n")
			if out.Replicas.fleet() {
				fmt.Fprintf(&b, "# from the journals of %d replicas: %s\n", len(out.Replicas.Answered), strings.Join(out.Replicas.Answered, ", "))
				out.Replicas.say(&b, "# ")
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

// count is "1 mock", "2 mocks".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
