package config

import (
	"fmt"
	"math"

	"github.com/goccy/go-yaml/ast"
)

// The transport faults (SPEC §17.2): declared beside loss and latency on a
// proxy and in a mock's proxy block.

// Abort cuts the client's connection: before anything is forwarded, after
// the upstream answered in full, or partway through the answer's body.
type Abort struct {
	Percentage Ratio       `yaml:"percentage" required:"true" doc:"The share of requests whose connection is cut, as a fraction."`
	At         AbortAt     `yaml:"at" required:"true" doc:"request: cut before anything goes upstream; response: forward, read the upstream's answer in full, then cut before a byte of it is sent; body: send the status, the headers and after bytes of body, then cut."`
	After      *AbortAfter `yaml:"after,omitempty" doc:"With at: body, how many bytes of body reach the client before the cut: 0 or more, a byte size such as 1Ki. Defaults to 0."`
	How        AbortHow    `yaml:"how,omitempty" doc:"reset: a TCP RST (the client reads ECONNRESET); close: a FIN (the client reads an early EOF). On HTTP/2 the stream is reset either way. Defaults to reset."`
	When       *When       `yaml:"when,omitempty" doc:"Narrows the requests it may fire on: headers, a count per key, a window of time. The percentage applies to those it admits."`
}

// AbortAt is where an abort cuts.
type AbortAt string

const (
	AbortAtRequest  AbortAt = "request"
	AbortAtResponse AbortAt = "response"
	AbortAtBody     AbortAt = "body"
)

var abortAts = []string{string(AbortAtRequest), string(AbortAtResponse), string(AbortAtBody)}

func (v *AbortAt) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "where an abort cuts")
	if err != nil {
		return err
	}
	switch AbortAt(s) {
	case AbortAtRequest, AbortAtResponse, AbortAtBody:
		*v = AbortAt(s)
		return nil
	}
	return refuse(n, "%s is not where an abort cuts; use request (before anything goes upstream), response (after the upstream answered) or body (partway through the body)", quote(s))
}

func (AbortAt) jsonSchema() map[string]any {
	return enumOf("Where the connection is cut: request, response or body.", abortAts)
}

// AbortHow is how the connection is cut.
type AbortHow string

const (
	AbortReset AbortHow = "reset"
	AbortClose AbortHow = "close"
)

var abortHows = []string{string(AbortReset), string(AbortClose)}

func (v *AbortHow) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "how an abort cuts")
	if err != nil {
		return err
	}
	switch AbortHow(s) {
	case AbortReset, AbortClose:
		*v = AbortHow(s)
		return nil
	}
	return refuse(n, "%s is not how an abort cuts; use reset (a TCP RST) or close (a FIN)", quote(s))
}

func (AbortHow) jsonSchema() map[string]any {
	return enumOf("reset (TCP RST) or close (FIN).", abortHows)
}

// AbortAfter is how many body bytes precede the cut: 0..1 GiB, written
// like a ByteSize.
type AbortAfter int64

func (v *AbortAfter) UnmarshalYAML(n ast.Node) error {
	b, err := byteCount(n, "a byte count such as 0, 512 or 1Ki")
	if err != nil {
		return err
	}
	if b < 0 || b > maxByteSize {
		return refuse(n, "%d is not a byte count: after is 0 to 1Gi bytes of body", b)
	}
	*v = AbortAfter(b)
	return nil
}

func (v AbortAfter) MarshalYAML() (any, error) { return int64(v), nil }

func (AbortAfter) jsonSchema() map[string]any {
	return byteSchema("Bytes of body sent before the cut, 0 to 1 GiB: a plain integer, or a number with B, Ki, Mi, Gi, KiB, MiB, GiB or kB, MB, GB.", 0, 1024)
}

// Hang holds a request unanswered, then closes its connection.
type Hang struct {
	Percentage Ratio       `yaml:"percentage" required:"true" doc:"The share of requests that hang, as a fraction."`
	Seconds    HangSeconds `yaml:"seconds" required:"true" doc:"How long nothing is answered, 0 to 3600, fractions allowed; then the connection is closed (a FIN). The upstream is never contacted."`
	When       *When       `yaml:"when,omitempty" doc:"Narrows the requests it may fire on: headers, a count per key, a window of time. The percentage applies to those it admits."`
}

// HangSeconds is how long a hang lasts: 0..3600, fractions allowed.
type HangSeconds float64

const maxHang = 3600

func (v *HangSeconds) UnmarshalYAML(n ast.Node) error {
	f, err := numberValue(n, "a number of seconds")
	if err != nil {
		return err
	}
	switch {
	case f < 0:
		return refuse(n, "%s is negative: a hang lasts 0 to %d seconds", fmtFloat(f), maxHang)
	case f > maxHang:
		return refuse(n, "%s seconds is over the %d-second maximum of a hang", fmtFloat(f), maxHang)
	}
	*v = HangSeconds(f)
	return nil
}

func (v HangSeconds) MarshalYAML() (any, error) { return float64(v), nil }

func (HangSeconds) jsonSchema() map[string]any {
	return num("number", "Seconds a hang lasts, 0 to 3600, fractions allowed.", 0, maxHang, 30)
}

// Bandwidth paces an answer's body.
type Bandwidth struct {
	Percentage     Ratio `yaml:"percentage" required:"true" doc:"The share of answers that are paced, as a fraction."`
	BytesPerSecond Rate  `yaml:"bytes_per_second" required:"true" doc:"The most body bytes sent per second: a byte size such as 16Ki. Latency still counts to the first byte."`
	When           *When `yaml:"when,omitempty" doc:"Narrows the requests it may fire on: headers, a count per key, a window of time. The percentage applies to those it admits."`
}

// Rate is a bandwidth in bytes per second: 1 byte to 1 GiB.
type Rate int64

func (v *Rate) UnmarshalYAML(n ast.Node) error {
	b, err := byteCount(n, "a byte size per second such as 16384 or 16Ki")
	if err != nil {
		return err
	}
	switch {
	case b <= 0:
		return refuse(n, "%d bytes per second would never send the body; give at least 1, such as 16Ki", b)
	case b > maxByteSize:
		return refuse(n, "%d bytes per second is over the 1Gi maximum", b)
	}
	*v = Rate(b)
	return nil
}

func (v Rate) MarshalYAML() (any, error) { return int64(v), nil }

func (Rate) jsonSchema() map[string]any {
	return byteSchema("Bytes per second, 1 to 1 GiB: a plain integer, or a number with B, Ki, Mi, Gi, KiB, MiB, GiB or kB, MB, GB.", 1, "16Ki")
}

// RetryAfter is a dropped request's Retry-After: whole seconds, 0..86400.
type RetryAfter int64

const maxRetryAfter = 86400

func (v *RetryAfter) UnmarshalYAML(n ast.Node) error {
	if f, ok := unwrap(n).(*ast.FloatNode); ok && f.Value != math.Trunc(f.Value) {
		return refuse(n, "%s is not a whole number of seconds: Retry-After is sent in whole seconds, 0 to %d; write %s",
			f.GetToken().Value, maxRetryAfter, fmtFloat(math.Ceil(f.Value)))
	}
	i, err := integerValue(n, "a whole number of seconds")
	if err != nil {
		return err
	}
	if i < 0 || i > maxRetryAfter {
		return refuse(n, "%d is not a Retry-After: whole seconds, 0 to %d (a day)", i, maxRetryAfter)
	}
	*v = RetryAfter(i)
	return nil
}

func (RetryAfter) jsonSchema() map[string]any {
	return num("integer", "Sent as Retry-After on the LOSS_INJECTED answer: whole seconds, 0 to 86400.", 0, maxRetryAfter, 2)
}

// GRPCStatus is a gRPC status code, 0 (OK) to 16 (UNAUTHENTICATED).
type GRPCStatus int

const maxGRPCStatus = 16

func (v *GRPCStatus) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "a gRPC status code")
	if err != nil {
		return err
	}
	if i < 0 || i > maxGRPCStatus {
		return refuse(n, "%d is not a gRPC status code: 0 (OK) to %d (UNAUTHENTICATED); 14 is UNAVAILABLE, what clients retry", i, maxGRPCStatus)
	}
	*v = GRPCStatus(i)
	return nil
}

func (GRPCStatus) jsonSchema() map[string]any {
	return num("integer", "A gRPC status code: 0 (OK) to 16 (UNAUTHENTICATED); 14 is UNAVAILABLE, 8 RESOURCE_EXHAUSTED, 4 DEADLINE_EXCEEDED.", 0, maxGRPCStatus, 14)
}

// byteCount reads an integer or a byte size's spelling, bounds left to the
// caller.
func byteCount(n ast.Node, what string) (int64, error) {
	if _, ok := unwrap(n).(*ast.IntegerNode); ok {
		return integerValue(n, what)
	}
	s, err := stringValue(n, what)
	if err != nil {
		return 0, err
	}
	b, perr := ParseBytes(s)
	if perr != nil {
		return 0, refuse(n, "%v", perr)
	}
	return b, nil
}

func byteSchema(desc string, min int, example any) map[string]any {
	return map[string]any{
		"description": desc,
		"oneOf": []any{
			map[string]any{"type": "integer", "minimum": min, "maximum": maxByteSize},
			map[string]any{"type": "string", "pattern": "^ *[0-9]+ *([bB]|[kKmMgG][iI][bB]?|[kKmMgG][bB])? *$"},
		},
		"examples": []any{example},
	}
}

// validateAbort is V41 at a proxy's or a mock's abort: after counts body
// bytes, so it needs at: body.
func validateAbort(at string, a *Abort) []Violation {
	if a == nil || a.After == nil || a.At == AbortAtBody {
		return nil
	}
	return []Violation{{Rule: "V41", Path: joinPath(at, "abort.after"),
		Message: fmt.Sprintf("after counts body bytes and applies only with at: body, not at: %s; remove after, or set at: body", a.At)}}
}
