package journal

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Entry is one request as the journal keeps it: immutable once recorded,
// shared by every reader.
type Entry struct {
	ID                    string    `json:"id"`
	Time                  time.Time `json:"time"`
	Proxy                 string    `json:"proxy"`
	Mock                  *string   `json:"mock"`
	Session               *string   `json:"session"`
	Method                string    `json:"method"`
	Path                  string    `json:"path"`
	Query                 string    `json:"query"`
	Headers               Headers   `json:"headers"`
	Body                  Body      `json:"body"`
	BodyTruncated         bool      `json:"body_truncated"`
	Status                Status    `json:"status"`
	ResponseHeaders       Headers   `json:"response_headers"`
	HeadersCut            bool      `json:"headers_cut"` // journal.headers cut a value or left one out, of either
	ResponseBody          Body      `json:"response_body"`
	ResponseBodyTruncated bool      `json:"response_body_truncated"`
	Fault                 Fault     `json:"fault"`
	DurationMS            float64   `json:"duration_ms"`
	UpstreamMS            *float64  `json:"upstream_ms"`
	Client                string    `json:"client"`
	// Counter is where its faults' when counts were kept in a fleet
	// (SPEC §18.1): "fleet", "local"; "" when nothing counted or no fleet.
	Counter string  `json:"counter,omitempty"`
	Tunnel  *Tunnel `json:"tunnel"`

	seq uint64 // the order of recording, from 1
	k   *kept  // what it was made from; filters read it
}

// Seq is the entry's place in the order of recording, from 1: a stream
// that replays entries skips the live ones it already sent by it.
func (e *Entry) Seq() uint64 { return e.seq }

// Status is the HTTP status answered. A tcp proxy's connection has none:
// its entry's is 0, written as null, rather than a number that reads as
// an answer no client got.
type Status int

func (s Status) MarshalJSON() ([]byte, error) {
	if s == 0 {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(s), 10), nil
}

func (s *Status) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*s = 0
		return nil
	}
	var n int
	if err := json.Unmarshal(data, &n); err != nil {
		return err
	}
	*s = Status(n)
	return nil
}

// Tunnel is what an upgraded connection (a WebSocket) relayed after the
// switch, until it closed.
type Tunnel struct {
	BytesUp    int64   `json:"bytes_up"`   // from the client to the upstream
	BytesDown  int64   `json:"bytes_down"` // from the upstream to the client
	DurationMS float64 `json:"duration_ms"`
}

// Fault is what fired for the request.
type Fault struct {
	Replace   bool    `json:"replace"`
	Loss      bool    `json:"loss"`
	Abort     *string `json:"abort"`
	Hang      bool    `json:"hang"`
	Bandwidth bool    `json:"bandwidth"`
	LatencyMS float64 `json:"latency_ms"`
}

// Body is a kept body: JSON text when it is UTF-8, else {"base64": ...}.
type Body []byte

func (b Body) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
}

func (b *Body) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = Body(s)
		return nil
	}
	var o struct {
		Base64 []byte `json:"base64"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return err
	}
	*b = o.Base64
	return nil
}

// Masked is what a secret header's value is kept as.
const Masked = "***"

// secretHeaders are masked unless journal.reveal lists them; the admin
// auth header joins them.
var secretHeaders = [...]string{"Authorization", "Proxy-Authorization", "Cookie"}

// secretResponseHeaders are an answer's: a session an upstream hands out
// is as much a credential as the cookie that carries it back.
var secretResponseHeaders = [...]string{"Set-Cookie"}

// secretsOf are the headers masked under these settings, canonical.
func secretsOf(reveals func(string) bool, names ...string) []string {
	var out []string
	for _, h := range names {
		h = http.CanonicalHeaderKey(strings.TrimSpace(h))
		if h == "" || reveals(h) {
			continue
		}
		out = append(out, h)
	}
	return out
}
