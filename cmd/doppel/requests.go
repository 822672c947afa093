package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/spf13/cobra"
)

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

// filter is the flags as the client's: a --limit under 1 is none.
func (f *filterFlags) filter() client.Filter {
	return client.Filter{Proxy: f.proxy, Mock: f.mock, Method: f.method, Path: f.path,
		Session: f.session, Since: f.since, Limit: max(f.limit, 0)}
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
			list, err := a.client().Requests(cmd.Context(), f.filter())
			if err != nil {
				return a.failure(err, "a list of requests")
			}
			if a.output == "json" {
				return a.printRaw(cmd)
			}
			var b strings.Builder
			fleet := isFleet(list.Replicas)
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			names := columnNames()
			if fleet {
				names = append(names, "REPLICA")
			}
			fmt.Fprintln(tw, strings.Join(names, "\t"))
			for _, e := range list.Requests {
				c := cells(&e)
				if fleet {
					c = append(c, e.Replica)
				}
				fmt.Fprintln(tw, strings.Join(c, "\t"))
			}
			_ = tw.Flush()
			sayMissing(&b, list.Replicas, "")
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

func row(w io.Writer, e *client.Request) {
	fmt.Fprintln(w, strings.Join(cells(e), "\t"))
}

// cells are an entry's row.
func cells(e *client.Request) []string {
	path := e.Path
	if e.Query != "" {
		path += "?" + e.Query
	}
	status := "-" // a tcp connection has no HTTP status
	if e.Status != 0 {
		status = strconv.Itoa(e.Status)
	}
	fault := strings.Join(faultNames(e.Fault), ", ")
	if fault == "" {
		fault = "-"
	}
	return []string{e.Time.Format("15:04:05.000"), e.ID, e.Proxy, cmpDash(e.Mock),
		e.Method, path, status, strconv.FormatFloat(e.DurationMS, 'g', -1, 64), fault}
}

// faultNames are what fired for an entry, named and ordered as the
// dashboard's requests page shows them (web/dashboard/requests.js).
func faultNames(f client.Fault) []string {
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
	if f.Abort != "" {
		out = append(out, "abort "+f.Abort)
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
			stream, err := a.streamClient().StreamRequests(cmd.Context(), f.filter())
			if err != nil {
				return a.failure(err, "")
			}
			defer stream.Close()
			return follow(cmd, stream, a.output == "json")
		},
	}
	a.register(cmd)
	f.register(cmd)
	return cmd
}

// follow prints a stream's events, one line each: an entry, how many
// were dropped because this client fell behind, or, of a fleet's stream
// (its first event says which replicas it follows), the replicas missing.
func follow(cmd *cobra.Command, stream *client.RequestStream, asJSON bool) error {
	out := cmd.OutOrStdout()
	headed, fleet := asJSON, false
	for {
		ev, err := stream.NextEvent()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return failed("the stream broke off: %v", err)
		}
		if !headed {
			// The first event says whether it is a fleet's stream.
			headed, fleet = true, ev.Kind == client.EventReplicas
			names := columnNames()
			if fleet {
				names = append(names, "REPLICA")
			}
			if err := padded(out, names); err != nil {
				return failed("writing the output: %v", err)
			}
		}
		var text string
		switch {
		case ev.Kind == client.EventComment:
		case asJSON:
			text = string(ev.Data) + "\n"
		case ev.Kind == client.EventDropped:
			text = "(this client fell behind: " + string(ev.Data) + ")\n"
		case ev.Kind == client.EventReplicas:
			var b strings.Builder
			fmt.Fprintf(&b, "(following the journals of %d replicas: %s)\n", len(ev.Replicas.Answered), strings.Join(ev.Replicas.Answered, ", "))
			sayMissing(&b, ev.Replicas, "")
			text = b.String()
		case ev.Kind == client.EventRequest:
			c := cells(&ev.Request)
			if fleet {
				c = append(c, ev.Request.Replica)
			}
			if err := padded(out, c); err != nil {
				return failed("writing the output: %v", err)
			}
		}
		if _, err := io.WriteString(out, text); err != nil {
			return failed("writing the output: %v", err)
		}
	}
}

func newRequestsVerifyCmd() *cobra.Command {
	var a adminFlags
	var file string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check what a client did against the journal; exit 1 when a condition does not hold",
		Long: `Send a verification (SPEC §17.4) to the admin API: which
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
			got, err := a.client().VerifyJSON(cmd.Context(), body)
			var notHeld *client.VerificationError
			if err != nil && !errors.As(err, &notHeld) {
				return a.failure(err, "a verification's")
			}
			if a.output == "json" {
				if err := a.printRaw(cmd); err != nil {
					return err
				}
			} else {
				var b strings.Builder
				replicas := got.Replicas
				if notHeld == nil {
					fmt.Fprintf(&b, "verified: %d requests matched, gaps %v ms\n", got.Matched, got.GapsMS)
				} else {
					replicas = notHeld.Replicas
					fmt.Fprintf(&b, "not verified: %s\n", notHeld.Message)
					tw := table(&b)
					for _, e := range notHeld.Requests {
						row(tw, &e)
					}
					_ = tw.Flush()
					if notHeld.RequestsOmitted > 0 {
						fmt.Fprintf(&b, "(the newest %d shown; %d older requests matched too)\n", len(notHeld.Requests), notHeld.RequestsOmitted)
					}
				}
				if isFleet(replicas) {
					fmt.Fprintf(&b, "(the journals of %d replicas: %s)\n", len(replicas.Answered), strings.Join(replicas.Answered, ", "))
				}
				sayMissing(&b, replicas, "")
				if err := write(cmd, b.String()); err != nil {
					return err
				}
			}
			if notHeld != nil {
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
			if err := a.client().ClearRequests(cmd.Context(), proxies...); err != nil {
				return a.failure(err, "")
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

// isFleet reports whether an answer is of more than one replica.
func isFleet(r client.ReplicasAnswered) bool { return len(r.Answered) > 1 || len(r.Missing) > 0 }

// sayMissing writes a line for each replica missing, after prefix.
func sayMissing(b *strings.Builder, r client.ReplicasAnswered, prefix string) {
	for _, m := range r.Missing {
		fmt.Fprintf(b, "%s(replica %s at %s is missing, %s: %s)\n", prefix, m.ID, cmpDash(m.URL), m.State, m.Error)
	}
}
