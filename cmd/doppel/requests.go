package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/spf13/cobra"
)

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

// filterFlags are the journal's filters.
type filterFlags struct {
	proxy, mock, method, path, session, since string
	limit                                     int
}

func (f *filterFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.proxy, "proxy", "", "only this proxy's requests")
	fs.StringVar(&f.mock, "mock", "", "only requests this mock answered")
	fs.StringVar(&f.method, "method", "", "only this method")
	fs.StringVar(&f.path, "path", "", "only paths this regular expression matches")
	fs.StringVar(&f.session, "session", "", "only this session's requests")
	fs.StringVar(&f.since, "since", "", "only requests after this one: a request id or an RFC 3339 time")
	fs.IntVar(&f.limit, "limit", 0, "only the newest this many, at most 10000 (list: 1000 unless given)")
}

func (f *filterFlags) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"proxy": f.proxy, "mock": f.mock, "method": f.method, "path": f.path, "session": f.session, "since": f.since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.limit > 0 {
		q.Set("limit", fmt.Sprint(f.limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func newRequestsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "Show, follow, verify and clear the request journal of a running Doppel",
		Example: `  doppel requests list --admin http://127.0.0.1:8081 --token "$TOKEN" --proxy billing
  doppel requests tail --admin http://127.0.0.1:8081 --token "$TOKEN"`,
	}
	cmd.AddCommand(newRequestsListCmd(), newRequestsTailCmd(), newRequestsVerifyCmd(), newRequestsClearCmd())
	return cmd
}

func newRequestsListCmd() *cobra.Command {
	var a adminFlags
	var f filterFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the requests the journal keeps, oldest first",
		Example: `  doppel requests list --admin http://127.0.0.1:8081 --token "$TOKEN"
  doppel requests list --admin http://127.0.0.1:8081 --proxy billing --method POST --path '^/charges' --limit 20
  doppel requests list --admin http://127.0.0.1:8081 -o json | jq '.requests[].status'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			_, raw, err := a.fetch("GET", "/api/v1/requests"+f.query(), nil, http.StatusOK)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return write(cmd, string(raw))
			}
			var list struct {
				Requests []*fleetEntry `json:"requests"`
				Dropped  uint64        `json:"dropped"`
				More     int           `json:"more"`
				Replicas fleetAnswer   `json:"replicas"`
			}
			if err := json.Unmarshal(raw, &list); err != nil {
				return failed("the admin API's answer is not a list of requests: %v", err)
			}
			var b strings.Builder
			fleet := list.Replicas.fleet()
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			names := columnNames()
			if fleet {
				names = append(names, "REPLICA")
			}
			fmt.Fprintln(tw, strings.Join(names, "\t"))
			for _, e := range list.Requests {
				c := cells(&e.Entry)
				if fleet {
					c = append(c, e.Replica)
				}
				fmt.Fprintln(tw, strings.Join(c, "\t"))
			}
			_ = tw.Flush()
			list.Replicas.say(&b, "")
			if list.More > 0 {
				fmt.Fprintf(&b, "(%d older requests matched too: --limit shows up to %d)\n", list.More, journal.MaxLimit)
			}
			if list.Dropped > 0 {
				fmt.Fprintf(&b, "(%d older requests were dropped to make room)\n", list.Dropped)
			}
			return write(cmd, b.String())
		},
	}
	a.register(cmd)
	f.register(cmd)
	return cmd
}

// columns are the table's, and what tail pads each to: it prints a row as
// each entry comes, so it cannot measure the column as a table does.
var columns = []struct {
	name  string
	width int
}{{"TIME", 12}, {"ID", 36}, {"PROXY", 12}, {"MOCK", 12}, {"METHOD", 7}, {"PATH", 30}, {"STATUS", 6}, {"MS", 8}, {"FAULT", 16}}

func table(w io.Writer) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columnNames(), "\t"))
	return tw
}

func columnNames() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return names
}

// padded writes cells at the columns' widths, for a stream.
func padded(w io.Writer, cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		if i < len(cells)-1 {
			fmt.Fprintf(&b, "%-*s  ", columns[i].width, c)
		} else {
			b.WriteString(c)
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func row(w io.Writer, e *journal.Entry) {
	fmt.Fprintln(w, strings.Join(cells(e), "\t"))
}

// cells are an entry's row.
func cells(e *journal.Entry) []string {
	mock := "-"
	if e.Mock != nil {
		mock = *e.Mock
	}
	path := e.Path
	if e.Query != "" {
		path += "?" + e.Query
	}
	status := "-" // a tcp connection has no HTTP status
	if e.Status != 0 {
		status = strconv.Itoa(int(e.Status))
	}
	fault := strings.Join(faultNames(e.Fault), ", ")
	if fault == "" {
		fault = "-"
	}
	return []string{e.Time.Format("15:04:05.000"), e.ID, e.Proxy, mock,
		e.Method, path, status, strconv.FormatFloat(e.DurationMS, 'g', -1, 64), fault}
}

// faultNames are what fired for an entry, named and ordered as the
// dashboard's requests page shows them (web/dashboard/requests.js).
func faultNames(f journal.Fault) []string {
	var out []string
	if f.Replace {
		out = append(out, "mock")
	}
	if f.Loss {
		out = append(out, "loss")
	}
	if f.LatencyMS > 0 {
		out = append(out, "latency "+millis(f.LatencyMS))
	}
	if f.Abort != nil {
		out = append(out, "abort "+*f.Abort)
	}
	if f.Hang {
		out = append(out, "hang")
	}
	if f.Bandwidth {
		out = append(out, "bandwidth")
	}
	return out
}

// millis is a time as the dashboard writes it: to the hundredth under
// 10 ms, else whole.
func millis(ms float64) string {
	if ms < 10 {
		ms = math.Round(ms*100) / 100
	} else {
		ms = math.Round(ms)
	}
	return strconv.FormatFloat(ms, 'f', -1, 64) + " ms"
}

func newRequestsTailCmd() *cobra.Command {
	var a adminFlags
	var f filterFlags
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow new requests as they happen, until interrupted",
		Example: `  doppel requests tail --admin http://127.0.0.1:8081 --token "$TOKEN"
  doppel requests tail --admin http://127.0.0.1:8081 --proxy billing -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			res, err := a.call("GET", "/api/v1/requests/stream"+f.query(), nil, &http.Client{})
			if err != nil {
				return err
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				raw, _ := io.ReadAll(res.Body)
				return envelopeError(res, raw)
			}
			return follow(cmd, res.Body, a.output == "json")
		},
	}
	a.register(cmd)
	f.register(cmd)
	return cmd
}

// follow prints a stream's events, one line each: an entry, how many
// were dropped because this client fell behind, or, of a fleet's stream
// (its first event says which replicas it follows), the replicas missing.
func follow(cmd *cobra.Command, body io.Reader, asJSON bool) error {
	out := cmd.OutOrStdout()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	event := ""
	headed, fleet := asJSON, false
	for sc.Scan() {
		line := sc.Text()
		if !headed && line != "" {
			headed, fleet = true, line == "event: replicas"
			names := columnNames()
			if fleet {
				names = append(names, "REPLICA")
			}
			if err := padded(out, names); err != nil {
				return failed("writing the output: %v", err)
			}
		}
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			var text string
			switch {
			case asJSON:
				text = data + "\n"
			case event == "dropped":
				text = "(this client fell behind: " + data + ")\n"
			case event == "replicas":
				var r fleetAnswer
				if json.Unmarshal([]byte(data), &r) == nil {
					var b strings.Builder
					fmt.Fprintf(&b, "(following the journals of %d replicas: %s)\n", len(r.Answered), strings.Join(r.Answered, ", "))
					r.say(&b, "")
					text = b.String()
				}
			case event == "request":
				var e fleetEntry
				if json.Unmarshal([]byte(data), &e) == nil {
					c := cells(&e.Entry)
					if fleet {
						c = append(c, e.Replica)
					}
					if err := padded(out, c); err != nil {
						return failed("writing the output: %v", err)
					}
				}
			}
			if _, err := io.WriteString(out, text); err != nil {
				return failed("writing the output: %v", err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return failed("the stream broke off: %v", err)
	}
	return nil
}

func newRequestsVerifyCmd() *cobra.Command {
	var a adminFlags
	var file string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check what a client did against the journal; exit 1 when a condition does not hold",
		Long: `Send a verification (SPEC §17.4) to POST /api/v1/requests/verify: which
requests (match) and what must hold of them (count, gaps_ms, same_header).
Exit 0 when every condition holds, 1 when one does not (the message says
which, and the matched requests follow).`,
		Example: `  doppel requests verify --admin http://127.0.0.1:8081 --file verify.json
  echo '{"match": {"path": "^/pay$", "headers": {"Idempotency-Key": "^order-1$"}}, "count": {"max": 4}, "gaps_ms": {"min": 100}, "same_header": "Idempotency-Key"}' |
    doppel requests verify --admin http://127.0.0.1:8081 --file -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			body, err := readJSONFile(cmd, file, "verification")
			if err != nil {
				return err
			}
			status, raw, err := a.fetch("POST", "/api/v1/requests/verify", body, http.StatusOK, http.StatusConflict)
			if err != nil {
				return err
			}
			var got struct {
				Message  string        `json:"message"`
				Matched  int           `json:"matched"`
				GapsMS   []float64     `json:"gaps_ms"`
				Requests []*fleetEntry `json:"requests"`
				Omitted  int           `json:"requests_omitted"`
				Replicas fleetAnswer   `json:"replicas"`
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				return failed("the admin API's answer is not a verification's: %v", err)
			}
			if a.output == "json" {
				if err := write(cmd, string(raw)); err != nil {
					return err
				}
			} else {
				var b strings.Builder
				if status == http.StatusOK {
					fmt.Fprintf(&b, "verified: %d requests matched, gaps %v ms\n", got.Matched, got.GapsMS)
				} else {
					fmt.Fprintf(&b, "not verified: %s\n", got.Message)
					tw := table(&b)
					for _, e := range got.Requests {
						row(tw, &e.Entry)
					}
					_ = tw.Flush()
					if got.Omitted > 0 {
						fmt.Fprintf(&b, "(the newest %d shown; %d older requests matched too)\n", len(got.Requests), got.Omitted)
					}
				}
				if got.Replicas.fleet() {
					fmt.Fprintf(&b, "(the journals of %d replicas: %s)\n", len(got.Replicas.Answered), strings.Join(got.Replicas.Answered, ", "))
				}
				got.Replicas.say(&b, "")
				if err := write(cmd, b.String()); err != nil {
					return err
				}
			}
			if status != http.StatusOK {
				return rejected
			}
			return nil
		},
	}
	a.register(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "the verification as JSON: a file, or - for stdin")
	return cmd
}

func newRequestsClearCmd() *cobra.Command {
	var a adminFlags
	var proxies []string
	cmd := &cobra.Command{
		Use:   "clear",
		Short: "Forget the journal's requests: of the proxies named, or of every proxy the token may update",
		Example: `  doppel requests clear --admin http://127.0.0.1:8081 --token "$TOKEN"
  doppel requests clear --admin http://127.0.0.1:8081 --token "$TOKEN" --proxy billing --proxy search`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			q := url.Values{"proxy": proxies}
			path := "/api/v1/requests"
			if len(proxies) > 0 {
				path += "?" + q.Encode()
			}
			if _, _, err := a.fetch("DELETE", path, nil, http.StatusNoContent); err != nil {
				return err
			}
			if a.output == "json" {
				return write(cmd, "{\"cleared\":true}\n")
			}
			return write(cmd, "cleared\n")
		},
	}
	a.register(cmd)
	cmd.Flags().StringArrayVar(&proxies, "proxy", nil, "a proxy whose requests to forget; repeat for more")
	return cmd
}

// fleetEntry is an entry of a fleet's answer: the replica that served it.
type fleetEntry struct {
	journal.Entry
	Replica string `json:"replica"`
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
