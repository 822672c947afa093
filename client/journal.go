package client

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Request is one entry of the journal: a request the proxy listener
// handled and what it answered.
type Request struct {
	// ID is the request's X-Request-ID; a retry that kept it repeats it.
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Proxy   string    `json:"proxy"`
	Mock    string    `json:"mock"`    // the mock that answered; empty when none
	Session string    `json:"session"` // the session it belonged to; empty when none
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Query   string    `json:"query"` // raw, as sent
	// Headers as received; secrets (the admin token's header,
	// Authorization, Proxy-Authorization, Cookie) read "***" unless
	// journal.reveal lists them.
	Headers       http.Header `json:"headers"`
	Body          Body        `json:"body"`
	BodyTruncated bool        `json:"body_truncated"`
	// Status is the HTTP status answered; 0 (null in the JSON) for a tcp
	// proxy's connection, which has none.
	Status          int         `json:"status"`
	ResponseHeaders http.Header `json:"response_headers"`
	// HeadersCut says journal.headers cut Headers or ResponseHeaders: a
	// value cut ends with "…", and headers past the bound are left out.
	HeadersCut            bool    `json:"headers_cut"`
	ResponseBody          Body    `json:"response_body"`
	ResponseBodyTruncated bool    `json:"response_body_truncated"`
	Fault                 Fault   `json:"fault"`
	DurationMS            float64 `json:"duration_ms"`
	// UpstreamMS is the upstream's time; nil when none answered.
	UpstreamMS *float64 `json:"upstream_ms"`
	Client     string   `json:"client"` // the peer's IP
	// Counter is where its faults' when counts were kept with the
	// PostgreSQL store: "fleet", or "local" when the database did not
	// answer in time; "" when nothing counted.
	Counter string `json:"counter,omitempty"`
	// Replica is the id of the replica that served it.
	Replica string `json:"replica,omitempty"`
	// Tunnel is what an upgraded connection (a WebSocket) or a tcp
	// proxy's connection relayed; nil for any other request.
	Tunnel *Tunnel `json:"tunnel"`
}

// Tunnel is what an upgraded connection relayed after the switch, until
// it closed.
type Tunnel struct {
	BytesUp    int64   `json:"bytes_up"`   // from the client to the upstream
	BytesDown  int64   `json:"bytes_down"` // from the upstream to the client
	DurationMS float64 `json:"duration_ms"`
}

// Fault is what fired for a request.
type Fault struct {
	Replace bool `json:"replace"` // a mock answered
	Loss    bool `json:"loss"`
	// Abort is where the connection was cut; empty when it was not.
	Abort     string  `json:"abort"`
	Hang      bool    `json:"hang"`
	Bandwidth bool    `json:"bandwidth"` // the answer's body was paced
	LatencyMS float64 `json:"latency_ms"`
}

// Body is a body the journal kept: its first journal.bodies bytes.
type Body []byte

// UnmarshalJSON reads the text, or {"base64": ...} for bytes that are
// not UTF-8.
func (b *Body) UnmarshalJSON(raw []byte) error {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		*b = Body(text)
		return nil
	}
	var bin struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(raw, &bin); err != nil || bin.Base64 == nil {
		return fmt.Errorf("a body is a string or {\"base64\": ...}, not %s", snippet(raw))
	}
	out, err := base64.StdEncoding.DecodeString(*bin.Base64)
	if err != nil {
		return fmt.Errorf("a body's base64: %w", err)
	}
	*b = out
	return nil
}

// MarshalJSON writes the body as the journal does.
func (b Body) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
}

// Filter selects journal entries; every field left empty selects all.
type Filter struct {
	Proxy   string
	Mock    string
	Method  string
	Path    string // a regular expression over the path, unanchored
	Session string
	// Since keeps the entries after one: an entry's ID, or a time
	// (exclusive).
	Since string
	// Limit keeps the newest that many (still oldest first): 1 to
	// 10,000; 0 lets the list answer its default of 1,000.
	Limit int
	// Local reads the replica asked alone; by default, with the
	// PostgreSQL store, a list and a stream read every live replica.
	Local bool
}

// SinceTime is t as Filter.Since takes it.
func SinceTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (f Filter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"proxy": f.Proxy, "mock": f.Mock, "method": f.Method,
		"path": f.Path, "session": f.Session, "since": f.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Local {
		q.Set("local", "true")
	}
	return q
}

// RequestList is a page of the journal.
type RequestList struct {
	// Requests are oldest first.
	Requests []Request `json:"requests"`
	// Dropped counts the entries the ring forgot since start.
	Dropped uint64 `json:"dropped"`
	// More counts the older entries that matched beyond the limit (1,000
	// unless Filter.Limit says): they are not in Requests.
	More int `json:"more"`
	// Replicas says whose journals the page holds: with the PostgreSQL
	// store every live replica's, merged by time.
	Replicas ReplicasAnswered `json:"replicas"`
}

// ReplicasAnswered is which replicas' journals an answer holds.
type ReplicasAnswered struct {
	// Answered are the ids of those it holds, the one asked first.
	Answered []string `json:"answered"`
	// Missing are those it lacks, and why.
	Missing []MissingReplica `json:"missing"`
}

// MissingReplica is a replica whose journal an answer lacks: lost, not
// answering within 2 s, or without the fleet key.
type MissingReplica struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	State string `json:"state"`
	Error string `json:"error"`
}

// Requests lists the journal's entries the filter selects, of the proxies
// the caller may read.
func (c *Client) Requests(ctx context.Context, f Filter) (RequestList, error) {
	var out RequestList
	_, err := c.do(ctx, call{op: opListRequests, query: f.query(), want: []int{http.StatusOK}, out: &out})
	return out, err
}

// ClearRequests forgets the journal's entries of the proxies named, or of
// every proxy the caller may update when none is.
func (c *Client) ClearRequests(ctx context.Context, proxies ...string) error {
	q := url.Values{}
	for _, p := range proxies {
		if p == "" {
			return errors.New("doppel clearRequests: a proxy name is empty")
		}
		q.Add("proxy", p)
	}
	_, err := c.do(ctx, call{op: opClearRequests, query: q, want: []int{http.StatusNoContent}})
	return err
}

// Verification is what a test expects the journal to hold.
type Verification struct {
	Match Match `json:"match"`
	// Count bounds how many entries match.
	Count *Range `json:"count,omitempty"`
	// GapsMS bounds the milliseconds between consecutive matched entries
	// (a backoff).
	GapsMS *Range `json:"gaps_ms,omitempty"`
	// SameHeader is a header every matched entry carries with one value,
	// such as Idempotency-Key.
	SameHeader string `json:"same_header,omitempty"`
	// Local verifies the journal of the replica asked alone.
	Local bool `json:"local,omitempty"`
	// Partial verifies what the replicas that answered hold when some did
	// not; without it a missing replica fails the call (503
	// REPLICA_UNAVAILABLE).
	Partial bool `json:"partial,omitempty"`
}

// Match selects the entries a verification looks at.
type Match struct {
	Proxy   string `json:"proxy,omitempty"`
	Mock    string `json:"mock,omitempty"`
	Method  string `json:"method,omitempty"`
	Path    string `json:"path,omitempty"` // a regular expression, unanchored
	Session string `json:"session,omitempty"`
	// Headers: header name -> a regular expression one of its values
	// must match.
	Headers map[string]string `json:"headers,omitempty"`
}

// Range is a closed interval; a nil end is open.
type Range struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// Exactly is the range [n, n].
func Exactly(n float64) *Range { return &Range{Min: &n, Max: &n} }

// AtLeast is the range [n, ∞).
func AtLeast(n float64) *Range { return &Range{Min: &n} }

// AtMost is the range [0, n].
func AtMost(n float64) *Range { return &Range{Max: &n} }

// Between is the range [lo, hi].
func Between(lo, hi float64) *Range { return &Range{Min: &lo, Max: &hi} }

// VerifyResult is a verification that held.
type VerifyResult struct {
	Matched int       `json:"matched"`
	GapsMS  []float64 `json:"gaps_ms"`
	// Replicas says whose journals were verified: with the PostgreSQL
	// store every live replica's.
	Replicas ReplicasAnswered `json:"replicas"`
	// Partial is true when some replica's journal was missing and
	// Verification.Partial allowed it.
	Partial bool `json:"partial,omitempty"`
}

// Verify checks the journal against v. A condition that does not hold is
// a *VerificationError (errors.Is(err, ErrVerificationFailed)) saying
// which, with the entries matched.
func (c *Client) Verify(ctx context.Context, v Verification) (VerifyResult, error) {
	return c.verify(ctx, v)
}

// VerifyJSON is Verify of a verification written as JSON, such as one
// read from a file: it is sent as written, so that Doppel judges it
// whole (a field this client does not know, a typo) and answers as it
// would any caller.
func (c *Client) VerifyJSON(ctx context.Context, verification []byte) (VerifyResult, error) {
	return c.verify(ctx, json.RawMessage(verification))
}

func (c *Client) verify(ctx context.Context, in any) (VerifyResult, error) {
	resp, err := c.send(ctx, call{op: opVerifyRequests, in: in})
	if err != nil {
		return VerifyResult{}, err
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("doppel %s: reading the answer: %w", opVerifyRequests.id, err)
	}
	c.answered(opVerifyRequests, resp.StatusCode, body)
	switch resp.StatusCode {
	case http.StatusOK:
		var out VerifyResult
		if err := json.Unmarshal(body, &out); err != nil {
			return VerifyResult{}, fmt.Errorf("doppel %s: the answer is not what the API documents: %w", opVerifyRequests.id, err)
		}
		return out, nil
	case http.StatusConflict:
		var failed struct {
			Code     string           `json:"code"`
			Message  string           `json:"message"`
			Matched  int              `json:"matched"`
			GapsMS   []float64        `json:"gaps_ms"`
			Requests []Request        `json:"requests"`
			Omitted  int              `json:"requests_omitted"`
			Replicas ReplicasAnswered `json:"replicas"`
			Partial  bool             `json:"partial"`
		}
		if json.Unmarshal(body, &failed) == nil && failed.Code == string(ErrVerificationFailed.(codeError)) {
			return VerifyResult{}, &VerificationError{Message: failed.Message, Matched: failed.Matched,
				GapsMS: failed.GapsMS, Requests: failed.Requests, RequestsOmitted: failed.Omitted,
				Replicas: failed.Replicas, Partial: failed.Partial}
		}
	}
	return VerifyResult{}, answerError(opVerifyRequests.id, resp.StatusCode, body)
}

// maxEvent bounds one event of the stream: an entry with its bodies.
const maxEvent = 64 << 20

// RequestStream is the journal's new entries as they are recorded. Close
// it when done; it ends with its context too.
type RequestStream struct {
	body     io.ReadCloser
	lines    *bufio.Scanner
	dropped  uint64
	replicas ReplicasAnswered
}

// StreamRequests follows the journal: entries the filter selects, as they
// happen. With Since or Limit set, the kept entries they select come
// first. A stream never slows Doppel's proxy: one read too slowly to
// keep within 1,000 entries of the newest loses the oldest, and Dropped
// counts them. A caller may have 16 streams open (the token's name
// counts), and Doppel 256 in all: beyond, the error is
// ErrTooManySubscribers.
func (c *Client) StreamRequests(ctx context.Context, f Filter) (*RequestStream, error) {
	resp, err := c.send(ctx, call{op: opStreamRequests, query: f.query()})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := readBounded(resp.Body)
		c.answered(opStreamRequests, resp.StatusCode, body)
		return nil, answerError(opStreamRequests.id, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("doppel %s: the answer is %q, not an event stream", opStreamRequests.id, ct)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 64<<10), maxEvent)
	return &RequestStream{body: resp.Body, lines: lines}, nil
}

// Next waits for the next entry. It returns io.EOF when the stream ended
// (Doppel stopped), and the context's error when it was cancelled.
func (s *RequestStream) Next() (Request, error) {
	for {
		ev, err := s.NextEvent()
		if err != nil {
			return Request{}, err
		}
		if ev.Kind == EventRequest {
			return ev.Request, nil
		}
	}
}

// The kinds of a stream's events.
const (
	// EventComment is a line Doppel writes for people or to keep the
	// connection open, such as the note opening a stream; no data.
	EventComment = ""
	// EventRequest is an entry, in Event.Request.
	EventRequest = "request"
	// EventDropped says this stream fell behind: Event.Dropped entries
	// were lost.
	EventDropped = "dropped"
	// EventReplicas is what a fleet's stream follows, in Event.Replicas:
	// its first event, and again when a replica goes or comes back.
	EventReplicas = "replicas"
)

// Event is one event of the stream, as Doppel sent it.
type Event struct {
	// Kind is one of the Event kinds, or one this client does not know.
	Kind string
	// Request is a request event's entry.
	Request Request
	// Dropped is a dropped event's count.
	Dropped uint64
	// Replicas is a replicas event's.
	Replicas ReplicasAnswered
	// Data is the event's data as it came (JSON); empty for a comment.
	Data []byte
}

// NextEvent waits for the next event of any kind: for a program that
// shows a fleet's replicas or what was dropped as it happens. Next is
// the entries alone. Dropped and Replicas follow the events either way.
func (s *RequestStream) NextEvent() (Event, error) {
	var event, data string
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if data == "" {
				event = ""
				continue
			}
			ev := Event{Kind: event, Data: []byte(data)}
			switch event {
			case EventRequest:
				if err := json.Unmarshal(ev.Data, &ev.Request); err != nil {
					return Event{}, fmt.Errorf("doppel %s: an entry that is not one: %w", opStreamRequests.id, err)
				}
			case EventDropped:
				var d struct {
					Dropped uint64 `json:"dropped"`
				}
				if json.Unmarshal(ev.Data, &d) == nil {
					ev.Dropped = d.Dropped
					s.dropped += d.Dropped
				}
			case EventReplicas:
				if json.Unmarshal(ev.Data, &ev.Replicas) == nil {
					s.replicas = ev.Replicas
				}
			}
			return ev, nil
		case strings.HasPrefix(line, ":"): // a comment: a note, or a keep-alive
			if event == "" && data == "" {
				return Event{Kind: EventComment}, nil
			}
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data != "" {
				data += "\n"
			}
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if err := s.lines.Err(); err != nil {
		return Event{}, fmt.Errorf("doppel %s: %w", opStreamRequests.id, err)
	}
	return Event{}, io.EOF
}

// Dropped counts the entries this stream lost by falling behind, so far:
// those recorded while more than 1,000 others waited to be read. They
// are still in the journal while it keeps them (Requests).
func (s *RequestStream) Dropped() uint64 { return s.dropped }

// Replicas is what the stream last said of the fleet: the replicas it
// follows (the one asked first) and those missing. With the file store,
// or Filter.Local, it says nothing: the zero value.
func (s *RequestStream) Replicas() ReplicasAnswered { return s.replicas }

// Close ends the stream.
func (s *RequestStream) Close() error { return s.body.Close() }
