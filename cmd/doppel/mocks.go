package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

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

// call sends one request to the admin API; an error envelope is a failure
// naming its code and message.
func (a *adminFlags) call(method, path string, body []byte, client *http.Client) (*http.Response, error) {
	req, err := http.NewRequest(method, strings.TrimRight(a.url, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, usage("%v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set(a.header, "Bearer "+a.token)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, failed("the admin API at %s cannot be reached: %v", a.url, err)
	}
	return res, nil
}

// httpClient is what list, verify and clear call the admin API with; tail's
// stream has no timeout.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// fetch makes one call and reads the whole answer: an answer whose status
// is not among want is the envelope's error.
func (a *adminFlags) fetch(method, path string, body []byte, want ...int) (int, []byte, error) {
	res, err := a.call(method, path, body, httpClient)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if !slices.Contains(want, res.StatusCode) {
		return res.StatusCode, raw, envelopeError(res, raw)
	}
	return res.StatusCode, raw, nil
}

func envelopeError(res *http.Response, raw []byte) error {
	var env struct{ Code, Message string }
	if json.Unmarshal(raw, &env) == nil && env.Code != "" {
		return failed("%d %s: %s", res.StatusCode, env.Code, env.Message)
	}
	return failed("the admin API answered %s", res.Status)
}

// fleetAnswer is what an answer says of the replicas it read.
type fleetAnswer struct {
	Answered []string `json:"answered"`
	Missing  []struct {
		ID, URL, State, Error string
	} `json:"missing"`
}

// fleet reports whether the answer is of more than one replica.
func (f fleetAnswer) fleet() bool { return len(f.Answered) > 1 || len(f.Missing) > 0 }

// say writes a line for each replica missing, after prefix.
func (f fleetAnswer) say(b *strings.Builder, prefix string) {
	for _, m := range f.Missing {
		fmt.Fprintf(b, "%s(replica %s at %s is missing, %s: %s)\n", prefix, m.ID, cmpDash(m.URL), m.State, m.Error)
	}
}
