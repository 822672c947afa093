package journal

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/doppelproxy/doppel/internal/jsonbody"
)

// Verification is a POST /api/v1/requests/verify body: which requests,
// and what must hold of them.
type Verification struct {
	Match      Match       `json:"match"`
	Count      *Range      `json:"count"`
	GapsMS     *Range      `json:"gaps_ms"`
	SameHeader string      `json:"same_header"`
	headers    []headerPat // Match.Headers, compiled
	path       *regexp.Regexp
}

// Match selects the requests verified.
type Match struct {
	Proxy   string            `json:"proxy"`
	Mock    string            `json:"mock"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Session string            `json:"session"`
}

// Range bounds a count or a gap; a missing end is open.
type Range struct {
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
}

type headerPat struct {
	name string
	re   *regexp.Regexp
}

// ParseVerification reads a body: unknown keys, bad patterns and empty
// ranges are refused, naming the key.
func ParseVerification(body []byte) (*Verification, error) {
	v := &Verification{}
	if err := jsonbody.DecodeKnown(body, v); err != nil {
		var unknown *jsonbody.UnknownKeyError
		if errors.As(err, &unknown) {
			return nil, &ParamError{unknown.Key, "unknown key; a verification has match, count, gaps_ms and same_header"}
		}
		var je *jsonbody.Error
		if errors.As(err, &je) && je.Syntax {
			return nil, &ParamError{"body", "not valid JSON: " + err.Error()}
		}
		return nil, &ParamError{"body", "not a verification: " + err.Error()}
	}
	if v.Match.Path != "" {
		re, err := regexp.Compile(v.Match.Path)
		if err != nil {
			return nil, &ParamError{"match.path", "not a regular expression: " + err.Error()}
		}
		v.path = re
	}
	// In a fixed order, so that the first bad one named is the same each time.
	for _, name := range slices.Sorted(maps.Keys(v.Match.Headers)) {
		pat := v.Match.Headers[name]
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, &ParamError{"match.headers." + name, "not a regular expression: " + err.Error()}
		}
		v.headers = append(v.headers, headerPat{name, re})
	}
	for _, kr := range []struct {
		key string
		r   *Range
	}{{"count", v.Count}, {"gaps_ms", v.GapsMS}} {
		key, r := kr.key, kr.r
		if r == nil {
			continue
		}
		for _, end := range []*float64{r.Min, r.Max} {
			if end != nil && (*end < 0 || math.IsInf(*end, 0)) {
				return nil, &ParamError{key, "bounds are numbers of at least 0"}
			}
		}
		if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
			return nil, &ParamError{key, "min is over max"}
		}
	}
	return v, nil
}

func (v *Verification) matches(e *Entry) bool {
	m := &v.Match
	switch {
	case m.Proxy != "" && e.Proxy != m.Proxy,
		m.Mock != "" && (e.Mock == nil || *e.Mock != m.Mock),
		m.Method != "" && !strings.EqualFold(e.Method, m.Method),
		m.Session != "" && (e.Session == nil || *e.Session != m.Session),
		v.path != nil && !v.path.MatchString(e.Path):
		return false
	}
	for _, h := range v.headers {
		found := false
		for _, val := range e.Headers.Values(h.name) {
			if h.re.MatchString(val) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Result is what a verification found. Failed says which condition did
// not hold; "" when all did.
type Result struct {
	Matched int       `json:"matched"`
	GapsMS  []float64 `json:"gaps_ms"`
	Entries []*Entry  `json:"-"`
	Failed  string    `json:"-"`
}

// Verify checks the entries (oldest first) visible to the caller.
func (v *Verification) Verify(entries []*Entry, visible func(proxy string) bool) *Result {
	res := &Result{GapsMS: []float64{}, Entries: []*Entry{}}
	for _, e := range entries {
		if visible(e.Proxy) && v.matches(e) {
			res.Entries = append(res.Entries, e)
		}
	}
	res.Matched = len(res.Entries)
	for i := 1; i < len(res.Entries); i++ {
		gap := res.Entries[i].Time.Sub(res.Entries[i-1].Time)
		res.GapsMS = append(res.GapsMS, float64(gap.Microseconds())/1000)
	}
	n := float64(res.Matched)
	switch {
	case v.Count != nil && v.Count.Min != nil && n < *v.Count.Min:
		res.Failed = fmt.Sprintf("count: %d requests matched, fewer than the min of %g", res.Matched, *v.Count.Min)
	case v.Count != nil && v.Count.Max != nil && n > *v.Count.Max:
		res.Failed = fmt.Sprintf("count: %d requests matched, more than the max of %g", res.Matched, *v.Count.Max)
	}
	if res.Failed != "" {
		return res
	}
	if v.GapsMS != nil {
		for i, g := range res.GapsMS {
			if v.GapsMS.Min != nil && g < *v.GapsMS.Min {
				res.Failed = fmt.Sprintf("gaps_ms: request %d came %gms after the one before, less than the min of %g", i+2, g, *v.GapsMS.Min)
				return res
			}
			if v.GapsMS.Max != nil && g > *v.GapsMS.Max {
				res.Failed = fmt.Sprintf("gaps_ms: request %d came %gms after the one before, more than the max of %g", i+2, g, *v.GapsMS.Max)
				return res
			}
		}
	}
	if v.SameHeader != "" && len(res.Entries) > 0 {
		first := res.Entries[0].Headers.Get(v.SameHeader)
		for i, e := range res.Entries {
			if got := e.Headers.Get(v.SameHeader); got != first || got == "" {
				res.Failed = fmt.Sprintf("same_header: request %d carries %s %q, request 1 %q", i+1, v.SameHeader, got, first)
				return res
			}
		}
	}
	return res
}
