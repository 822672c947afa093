package config

import (
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Journal bounds the request journal (SPEC §17.4): the newest requests of
// the proxy listener, kept in memory for the admin API to show and verify.
type Journal struct {
	Size   *JournalSize  `yaml:"size" doc:"How many requests are kept: the newest that many. Defaults to 10000; 0 turns the journal off. At most 1000000."`
	Bodies *JournalBytes `yaml:"bodies" doc:"How much of each body is kept, request and response separately; the rest is cut and marked. Defaults to 4Ki; 0 keeps none. At most 1Mi."`
	// Headers and Bytes are nil while they hold their defaults, so that a
	// document written before they existed keeps its revision.
	Headers *JournalHeaders `yaml:"headers,omitempty" doc:"How much of each entry's request headers, and of its response headers, is kept: names and values, the smallest first; a value cut ends with … and the entry says headers_cut. Defaults to 16Ki; 0 keeps none. At most 1Mi."`
	Bytes   *JournalBudget  `yaml:"bytes,omitempty" doc:"The journal's byte budget beside size: it keeps the newest entries that fit both, and an entry evicted by either counts in dropped. Defaults to 64Mi; at least 1Mi, at most 64Gi."`
	Reveal  []HeaderName    `yaml:"reveal,omitempty" doc:"Secret headers to keep as sent rather than as ***: the admin auth header, Authorization, Proxy-Authorization and Cookie of a request, and Set-Cookie of an answer, are masked unless listed here."`
}

// Journal defaults and bounds.
const (
	DefaultJournalSize   JournalSize  = 10000
	DefaultJournalBodies JournalBytes = 4 << 10
	maxJournalSize                    = 1_000_000
	maxJournalBodies                  = 1 << 20

	DefaultJournalHeaders JournalHeaders = 16 << 10
	maxJournalHeaders                    = 1 << 20
	DefaultJournalBytes   JournalBudget  = 64 << 20
	minJournalBytes                      = 1 << 20
	maxJournalBytes                      = 64 << 30
)

func (j *Journal) normalize() {
	if j.Size == nil {
		s := DefaultJournalSize
		j.Size = &s
	}
	if j.Bodies == nil {
		b := DefaultJournalBodies
		j.Bodies = &b
	}
	if len(j.Reveal) == 0 {
		j.Reveal = nil
	}
	if j.Headers != nil && *j.Headers == DefaultJournalHeaders {
		j.Headers = nil
	}
	if j.Bytes != nil && *j.Bytes == DefaultJournalBytes {
		j.Bytes = nil
	}
}

// HeadersKept is journal.headers, its default when unset.
func (j *Journal) HeadersKept() int {
	if j == nil || j.Headers == nil {
		return int(DefaultJournalHeaders)
	}
	return int(*j.Headers)
}

// Budget is journal.bytes, its default when unset.
func (j *Journal) Budget() int64 {
	if j == nil || j.Bytes == nil {
		return int64(DefaultJournalBytes)
	}
	return int64(*j.Bytes)
}

// isDefault reports a journal as Normalize leaves a document without one:
// the canonical form leaves it out, so that a document written before the
// journal existed keeps its revision.
func (j *Journal) isDefault() bool {
	return j == nil || (j.Size != nil && *j.Size == DefaultJournalSize &&
		j.Bodies != nil && *j.Bodies == DefaultJournalBodies && len(j.Reveal) == 0 &&
		j.Headers == nil && j.Bytes == nil)
}

// Reveals reports whether the header (any case) is listed in reveal.
func (j *Journal) Reveals(name string) bool {
	return slices.ContainsFunc(j.Reveal, func(h HeaderName) bool { return strings.EqualFold(string(h), name) })
}

// JournalSize is how many entries the journal keeps, 0..1,000,000.
type JournalSize int

func (v *JournalSize) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "a number of requests")
	if err != nil {
		return err
	}
	if i < 0 || i > maxJournalSize {
		return refuse(n, "%d is not a journal size: keep 0 (off) to 1000000 requests", i)
	}
	*v = JournalSize(i)
	return nil
}

func (JournalSize) jsonSchema() map[string]any {
	return num("integer", "How many requests the journal keeps; 0 turns it off.", 0, maxJournalSize, 10000)
}

// JournalBytes is how much of a body the journal keeps, 0..1 MiB, written
// like a ByteSize.
type JournalBytes int64

func (v *JournalBytes) UnmarshalYAML(n ast.Node) error {
	b, err := byteCount(n, "a byte size such as 4096 or 4Ki")
	if err != nil {
		return err
	}
	switch {
	case b < 0:
		return refuse(n, "%d is not a size: keep 0 (no bodies) to 1Mi bytes of each body", b)
	case b > maxJournalBodies:
		return refuse(n, "%d bytes is over the journal's 1Mi bound per body", b)
	}
	*v = JournalBytes(b)
	return nil
}

func (v JournalBytes) MarshalYAML() (any, error) { return int64(v), nil }

func (JournalBytes) jsonSchema() map[string]any {
	return map[string]any{
		"description": "Bytes of each body the journal keeps, 0 to 1 MiB: a plain integer, or a number with B, Ki, Mi, KiB, MiB or kB, MB.",
		"oneOf": []any{
			map[string]any{"type": "integer", "minimum": 0, "maximum": maxJournalBodies},
			map[string]any{"type": "string", "pattern": "^ *[0-9]+ *([bB]|[kKmMgG][iI][bB]?|[kKmMgG][bB])? *$"},
		},
		"examples": []any{4096, "4Ki"},
	}
}

// JournalHeaders is how much of an entry's request headers, and of its
// response headers, the journal keeps: 0..1 MiB, written like a ByteSize.
type JournalHeaders int64

func (v *JournalHeaders) UnmarshalYAML(n ast.Node) error {
	b, err := byteCount(n, "a byte size such as 16384 or 16Ki")
	if err != nil {
		return err
	}
	switch {
	case b < 0:
		return refuse(n, "%d is not a size: keep 0 (no headers) to 1Mi bytes of each entry's headers", b)
	case b > maxJournalHeaders:
		return refuse(n, "%d bytes is over the journal's 1Mi bound on an entry's headers", b)
	}
	*v = JournalHeaders(b)
	return nil
}

func (v JournalHeaders) MarshalYAML() (any, error) { return int64(v), nil }

func (JournalHeaders) jsonSchema() map[string]any {
	return map[string]any{
		"description": "Bytes of each entry's request headers, and of its response headers, the journal keeps (names and values), 0 to 1 MiB: a plain integer, or a number with B, Ki, Mi, KiB, MiB or kB, MB.",
		"oneOf": []any{
			map[string]any{"type": "integer", "minimum": 0, "maximum": maxJournalHeaders},
			map[string]any{"type": "string", "pattern": "^ *[0-9]+ *([bB]|[kKmMgG][iI][bB]?|[kKmMgG][bB])? *$"},
		},
		"examples": []any{16384, "16Ki"},
	}
}

// JournalBudget is the bytes the journal's entries may take in all,
// 1 MiB..64 GiB, written like a ByteSize.
type JournalBudget int64

func (v *JournalBudget) UnmarshalYAML(n ast.Node) error {
	b, err := byteCount(n, "a byte size such as 64Mi")
	if err != nil {
		return err
	}
	if b < minJournalBytes || b > maxJournalBytes {
		return refuse(n, "%d bytes is not a journal budget: give 1Mi to 64Gi (journal.size 0 turns the journal off)", b)
	}
	*v = JournalBudget(b)
	return nil
}

func (v JournalBudget) MarshalYAML() (any, error) { return int64(v), nil }

func (JournalBudget) jsonSchema() map[string]any {
	return map[string]any{
		"description": "Bytes the journal's entries may take in all, 1 MiB to 64 GiB: a plain integer, or a number with B, Ki, Mi, Gi, KiB, MiB, GiB or kB, MB, GB.",
		"oneOf": []any{
			map[string]any{"type": "integer", "minimum": minJournalBytes, "maximum": maxJournalBytes},
			map[string]any{"type": "string", "pattern": "^ *[0-9]+ *([bB]|[kKmMgG][iI][bB]?|[kKmMgG][bB])? *$"},
		},
		"examples": []any{67108864, "64Mi"},
	}
}

// Receipts says when a proxy's answers carry X-Doppel-Fault, naming the
// faults that fired: never (""), always ("true"), or when the request
// asks with X-Doppel-Receipt: 1 ("on_request").
type Receipts string

const (
	ReceiptsOff       Receipts = ""
	ReceiptsAlways    Receipts = "true"
	ReceiptsOnRequest Receipts = "on_request"
)

func (v *Receipts) UnmarshalYAML(n ast.Node) error {
	if b, ok := unwrap(n).(*ast.BoolNode); ok {
		*v = ReceiptsOff
		if b.Value {
			*v = ReceiptsAlways
		}
		return nil
	}
	if s, ok := unwrap(n).(*ast.StringNode); ok && s.Value == string(ReceiptsOnRequest) {
		*v = ReceiptsOnRequest
		return nil
	}
	return refuse(n, "must be true, false or on_request, not %s", describe(n))
}

func (v Receipts) MarshalYAML() (any, error) {
	if v == ReceiptsAlways {
		return true, nil
	}
	return string(v), nil
}

func (Receipts) jsonSchema() map[string]any {
	return map[string]any{
		"description": "true: every answer carries X-Doppel-Fault naming the faults that fired; on_request: only answers to requests sending X-Doppel-Receipt: 1; false: none.",
		"oneOf":       []any{map[string]any{"type": "boolean"}, map[string]any{"const": "on_request"}},
		"examples":    []any{true, "on_request"},
	}
}
