package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// When narrows the requests a fault may fire on (SPEC §17.3): the headers
// they carry, where they fall in a count per key, and a window of time.
// The fault's percentage then applies to the requests it admits.
type When struct {
	Headers map[HeaderName]Pattern `yaml:"headers,omitempty" doc:"Header name -> regular expression on its value, unanchored; every one must match (a missing header does not). Only the requests admitted are counted."`
	Count   *Count                 `yaml:"count,omitempty" doc:"Where in the count of its key a request must fall: {first: N}, {every: K} or {after: N}."`
	Per     *Per                   `yaml:"per,omitempty" doc:"What the count is kept per: {header: NAME} (its value; a request without it counts under \"\") or {client: ip}. Defaults to the whole proxy."`
	Window  *Window                `yaml:"window,omitempty" doc:"When, in seconds since the first request its counter saw, the fault may fire: {from, for}."`
}

// Count says which of a key's admitted requests a fault may fire on:
// exactly one of First (the first N), Every (the K-th, 2K-th, ...) and
// After (every one after the first N).
type Count struct {
	First *CountN `yaml:"first,omitempty" doc:"The first N requests of each key, 1 or more."`
	Every *CountN `yaml:"every,omitempty" doc:"The K-th, 2K-th, ... request of each key, 1 or more."`
	After *CountN `yaml:"after,omitempty" doc:"Every request of each key after the first N, 0 or more."`
}

// CountN is a number of requests, 0..1,000,000,000.
type CountN int64

const maxCountN = 1_000_000_000

func (v *CountN) UnmarshalYAML(n ast.Node) error {
	i, err := integerValue(n, "a whole number of requests")
	if err != nil {
		return err
	}
	if i < 0 || i > maxCountN {
		return refuse(n, "%d is not a number of requests: 0 to %d", i, maxCountN)
	}
	*v = CountN(i)
	return nil
}

func (CountN) jsonSchema() map[string]any {
	return num("integer", "A number of requests.", 0, maxCountN, 2)
}

// Per is what a count is kept per: a header's value, or the client's IP.
type Per struct {
	Header HeaderName `yaml:"header,omitempty" doc:"Count per value of this header, such as Idempotency-Key."`
	Client PerClient  `yaml:"client,omitempty" doc:"ip: count per client IP (the peer's address)."`
}

// PerClient is how a client is told apart: by its IP.
type PerClient string

const PerClientIP PerClient = "ip"

func (v *PerClient) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "how clients are told apart")
	if err != nil {
		return err
	}
	if s != string(PerClientIP) {
		return refuse(n, "%s is not how clients are told apart; the only kind is ip (the peer's address): write per: {client: ip}", quote(s))
	}
	*v = PerClientIP
	return nil
}

func (PerClient) jsonSchema() map[string]any {
	return enumOf("Count per client IP.", []string{string(PerClientIP)})
}

// Window is a span of seconds since the first request a counter saw.
type Window struct {
	From WindowSeconds  `yaml:"from" doc:"Seconds since the first request the counter saw when the window opens. Defaults to 0."`
	For  *WindowSeconds `yaml:"for" required:"true" doc:"How many seconds the window stays open."`
}

// WindowSeconds is a time in a window: 0..86400 seconds, fractions
// allowed.
type WindowSeconds float64

const maxWindow = 86400

func (v *WindowSeconds) UnmarshalYAML(n ast.Node) error {
	f, err := numberValue(n, "a number of seconds")
	if err != nil {
		return err
	}
	if f < 0 || f > maxWindow {
		return refuse(n, "%s is not a time in a window: 0 to %d seconds (a day)", fmtFloat(f), maxWindow)
	}
	*v = WindowSeconds(f)
	return nil
}

func (v WindowSeconds) MarshalYAML() (any, error) { return float64(v), nil }

func (WindowSeconds) jsonSchema() map[string]any {
	return num("number", "Seconds, 0 to 86400, fractions allowed.", 0, maxWindow, 30)
}

// Counted reports whether the condition keeps counters (a count or a
// window).
func (w *When) Counted() bool { return w != nil && (w.Count != nil || w.Window != nil) }

// validateWhen is V42 (a count is exactly one of first, every, after;
// every is at least 1), V43 (per is a header or the client, not both nor
// neither) and V44 (a window is open for some time) at a fault's when.
func validateWhen(at string, w *When) []Violation {
	if w == nil {
		return nil
	}
	var vs []Violation
	if c := w.Count; c != nil {
		var set []string
		for _, k := range []struct {
			name string
			v    *CountN
		}{{"first", c.First}, {"every", c.Every}, {"after", c.After}} {
			if k.v != nil {
				set = append(set, k.name)
			}
		}
		switch {
		case len(set) == 0:
			vs = append(vs, Violation{Rule: "V42", Path: joinPath(at, "when.count"), Message: "a count needs one of first, every or after, such as {first: 2}"})
		case len(set) > 1:
			vs = append(vs, Violation{Rule: "V42", Path: joinPath(at, "when.count"),
				Message: fmt.Sprintf("a count is one of first, every or after, not %s together; keep one, such as {%s: %d}", joinAnd(set), set[0], countOf(c, set[0]))})
		case c.Every != nil && *c.Every == 0:
			vs = append(vs, Violation{Rule: "V42", Path: joinPath(at, "when.count.every"), Message: "every: 0 would never fire; every: 1 is every request, every: 3 the third, sixth, ..."})
		case c.First != nil && *c.First == 0:
			vs = append(vs, Violation{Rule: "V42", Path: joinPath(at, "when.count.first"), Message: "first: 0 would never fire; give at least 1, or remove the fault"})
		}
	}
	// V44: a window that is never open would never fire.
	if win := w.Window; win != nil && win.For != nil && *win.For == 0 {
		vs = append(vs, Violation{Rule: "V44", Path: joinPath(at, "when.window.for"), Message: "for: 0 is a window never open, so the fault would never fire; give the seconds it stays open, such as for: 30"})
	}
	if p := w.Per; p != nil {
		switch {
		case p.Header != "" && p.Client != "":
			vs = append(vs, Violation{Rule: "V43", Path: joinPath(at, "when.per"), Message: "per is a header or the client, not both; keep {header: " + string(p.Header) + "} or {client: ip}"})
		case p.Header == "" && p.Client == "":
			vs = append(vs, Violation{Rule: "V43", Path: joinPath(at, "when.per"), Message: "per needs a kind: {header: Idempotency-Key} or {client: ip}"})
		}
	}
	return vs
}

func countOf(c *Count, name string) CountN {
	switch name {
	case "first":
		return *c.First
	case "every":
		return *c.Every
	}
	return *c.After
}

func joinAnd(names []string) string {
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// whens are the conditions of a proxy's or a mock's faults, by key.
func (f Faults) whens() map[string]*When {
	out := map[string]*When{}
	if f.Loss != nil {
		out["loss"] = f.Loss.When
	}
	if f.Latency != nil {
		out["latency"] = f.Latency.When
	}
	if f.Abort != nil {
		out["abort"] = f.Abort.When
	}
	if f.Hang != nil {
		out["hang"] = f.Hang.When
	}
	if f.Bandwidth != nil {
		out["bandwidth"] = f.Bandwidth.When
	}
	return out
}

// When is the condition of the fault of that kind in f, if any.
func (f Faults) When(kind string) *When { return f.whens()[kind] }

// validateWhens checks the conditions of every fault in f, under at.
func validateWhens(at string, f Faults) []Violation {
	var vs []Violation
	ws := f.whens()
	for _, k := range slices.Sorted(maps.Keys(ws)) {
		vs = append(vs, validateWhen(joinPath(at, k), ws[k])...)
	}
	return vs
}
