package client

import (
	"encoding/json"
	"fmt"
)

// The proxy document, as the admin API reads and writes it: the same
// keys as the YAML configuration (see the JSON Schema at /api/v1/schema,
// or `doppel config schema`). Durations are seconds, sizes bytes, shares
// fractions (0.1 is one in ten). A field left at its zero value is left
// out, and Doppel's default applies; pointers mark the fields whose zero
// means something.

// Proxy is one proxy: an upstream, how requests reach it, its mocks and
// its faults.
type Proxy struct {
	Name string `json:"name"`
	// Type is http (the default when empty) or tcp.
	Type string `json:"type"`
	// URL is the upstream base of an http proxy, such as
	// https://api.example.com/v2/.
	URL string `json:"url,omitempty"`
	// Listen and Upstream are a tcp proxy's: the HOST:PORT its listener
	// binds, and the one each connection is relayed to.
	Listen   string `json:"listen,omitempty"`
	Upstream string `json:"upstream,omitempty"`
	// Timeout bounds the upstream exchange, in whole seconds (default 30).
	Timeout int `json:"timeout,omitempty"`
	// BodyLimit bounds what is buffered, in bytes (default 1 MiB).
	BodyLimit int64 `json:"body_limit,omitempty"`
	// Resolve is how a request reaches this proxy (default: the one
	// taking anything unclaimed).
	Resolve *Resolve     `json:"resolve,omitempty"`
	Access  *ProxyAccess `json:"access,omitempty"`
	// Headers are injected into every forwarded request.
	Headers   map[string]string `json:"headers,omitempty"`
	Loss      *Loss             `json:"loss,omitempty"`
	Latency   *Latency          `json:"latency,omitempty"`
	Abort     *Abort            `json:"abort,omitempty"`
	Hang      *Hang             `json:"hang,omitempty"`
	Bandwidth *Bandwidth        `json:"bandwidth,omitempty"`
	// Replace is the share of matching requests a mock answers (default 1).
	Replace          *float64 `json:"replace,omitempty"`
	RewriteRedirects *bool    `json:"rewrite_redirects,omitempty"`
	RewriteURLs      *bool    `json:"rewrite_urls,omitempty"`
	// Mocks are tried in order; the first match answers.
	Mocks    []Mock   `json:"mocks,omitempty"`
	Receipts Receipts `json:"receipts,omitempty"`
}

// Resolve says how requests reach a proxy: Type default, or header with
// Header naming the header that carries the proxy's name.
type Resolve struct {
	Type   string `json:"type"`
	Header string `json:"header,omitempty"`
}

// ByHeader resolves requests whose header names the proxy.
func ByHeader(header string) *Resolve { return &Resolve{Type: "header", Header: header} }

// ProxyAccess overrides admin.access for one proxy.
type ProxyAccess struct {
	Read   Subjects `json:"read,omitempty"`
	Update Subjects `json:"update,omitempty"`
	Delete Subjects `json:"delete,omitempty"`
	Upload Subjects `json:"upload,omitempty"`
}

// Subjects are who may perform an action: token and group names, or
// "public" alone.
type Subjects []string

// UnmarshalJSON reads one name or a list of them.
func (s *Subjects) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = Subjects{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("subjects are a name or a list of names: %w", err)
	}
	*s = many
	return nil
}

// Loss drops a share of requests, answering them with Status.
type Loss struct {
	Percentage float64 `json:"percentage"`
	Status     int     `json:"status"`
	// RetryAfter is sent as Retry-After, in whole seconds.
	RetryAfter *int              `json:"retry_after,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	// GRPCStatus drops a gRPC call as gRPC fails: HTTP 200 with this
	// grpc-status (0 to 16; 14 is UNAVAILABLE, which clients retry).
	GRPCStatus *int  `json:"grpc_status,omitempty"`
	When       *When `json:"when,omitempty"`
}

// Latency makes a share of requests take between Min and Max seconds (a
// tcp proxy's connections: before their first byte, and Jitter more on
// each chunk).
type Latency struct {
	Percentage float64  `json:"percentage"`
	Min        float64  `json:"min"`
	Max        float64  `json:"max"`
	Jitter     *float64 `json:"jitter,omitempty"`
	When       *When    `json:"when,omitempty"`
}

// Abort cuts a share of connections. At is request, response or body;
// with body, After bytes of it reach the client first. How is reset (a
// TCP RST, the default) or close (a FIN).
type Abort struct {
	Percentage float64 `json:"percentage"`
	At         string  `json:"at"`
	After      *int64  `json:"after,omitempty"`
	How        string  `json:"how,omitempty"`
	When       *When   `json:"when,omitempty"`
}

// Hang holds a share of requests unanswered for Seconds, then closes the
// connection.
type Hang struct {
	Percentage float64 `json:"percentage"`
	Seconds    float64 `json:"seconds"`
	When       *When   `json:"when,omitempty"`
}

// Bandwidth paces a share of answers' bodies to BytesPerSecond.
type Bandwidth struct {
	Percentage     float64 `json:"percentage"`
	BytesPerSecond int64   `json:"bytes_per_second"`
	When           *When   `json:"when,omitempty"`
}

// When narrows the requests a fault may fire on.
type When struct {
	// Headers: header name -> a regular expression its value must match.
	Headers map[string]string `json:"headers,omitempty"`
	Count   *Count            `json:"count,omitempty"`
	Per     *Per              `json:"per,omitempty"`
	Window  *Window           `json:"window,omitempty"`
}

// Count is where in its key's count a request must fall: one of First
// (the first N), Every (each K-th) or After (all after the first N).
type Count struct {
	First *int64 `json:"first,omitempty"`
	Every *int64 `json:"every,omitempty"`
	After *int64 `json:"after,omitempty"`
}

// Per is what a count is kept per: a header's value (Header) or the
// client's IP (Client: "ip").
type Per struct {
	Header string `json:"header,omitempty"`
	Client string `json:"client,omitempty"`
}

// Window is when, in seconds since a counter's first request, a fault may
// fire.
type Window struct {
	From float64 `json:"from,omitempty"`
	For  float64 `json:"for"`
}

// Mock answers a matching request itself.
type Mock struct {
	Name     string        `json:"name"`
	Request  MockRequest   `json:"request"`
	Response MockResponse  `json:"response"`
	Proxy    *MockOverride `json:"proxy,omitempty"`
}

// MockRequest is what a mock matches, and the variables it takes out of
// the request.
type MockRequest struct {
	Method string `json:"method"`
	// URL is a regular expression over the path, unanchored; named groups
	// become template variables.
	URL string `json:"url"`
	// Headers, Query and Body map variable names to a header name, a
	// query selector (.filter) and a JSON body selector (.items.id).
	Headers map[string]string `json:"headers,omitempty"`
	Query   map[string]string `json:"query,omitempty"`
	Body    map[string]string `json:"body,omitempty"`
}

// MockResponse is what a mock answers: a Status and at most one of Body
// (a Jinja2 template sent as text/plain), JSON (a template whose output
// is JSON) or Template (a file of the proxy's).
type MockResponse struct {
	Status   int               `json:"status"`
	Body     string            `json:"body,omitempty"`
	JSON     string            `json:"json,omitempty"`
	Template string            `json:"template,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// MockOverride is a mock's own replace and faults.
type MockOverride struct {
	Replace   *float64   `json:"replace,omitempty"`
	Loss      *Loss      `json:"loss,omitempty"`
	Latency   *Latency   `json:"latency,omitempty"`
	Abort     *Abort     `json:"abort,omitempty"`
	Hang      *Hang      `json:"hang,omitempty"`
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// Receipts says when answers carry X-Doppel-Fault: ReceiptsOff,
// ReceiptsAlways, or ReceiptsOnRequest (requests sending
// X-Doppel-Receipt: 1).
type Receipts string

const (
	ReceiptsOff       Receipts = ""
	ReceiptsAlways    Receipts = "true"
	ReceiptsOnRequest Receipts = "on_request"
)

// MarshalJSON writes true, false or "on_request".
func (r Receipts) MarshalJSON() ([]byte, error) {
	switch r {
	case ReceiptsOff:
		return []byte("false"), nil
	case ReceiptsAlways:
		return []byte("true"), nil
	}
	return json.Marshal(string(r))
}

// UnmarshalJSON reads true, false or "on_request".
func (r *Receipts) UnmarshalJSON(b []byte) error {
	var on bool
	if json.Unmarshal(b, &on) == nil {
		*r = ReceiptsOff
		if on {
			*r = ReceiptsAlways
		}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("receipts are true, false or \"on_request\": %w", err)
	}
	*r = Receipts(s)
	return nil
}

// Ptr is a pointer to v, for the optional fields: Replace:
// client.Ptr(0.5).
func Ptr[T any](v T) *T { return &v }
