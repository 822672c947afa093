package journal

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"time"

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
		v.headers = append(v.headers, headerPat{http.CanonicalHeaderKey(name), re})
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

// matches reads the kept bytes, as a filter does.
func (v *Verification) matches(k *kept) bool {
	m := &v.Match
	switch {
	case m.Proxy != "" && string(k.field(textProxy)) != m.Proxy,
		m.Mock != "" && (!k.has(flagMock) || string(k.field(textMock)) != m.Mock),
		m.Method != "" && !bytes.EqualFold(k.field(textMethod), []byte(m.Method)),
		m.Session != "" && string(k.field(textSession)) != m.Session,
		v.path != nil && !v.path.Match(k.field(textPath)):
		return false
	}
	for _, h := range v.headers {
		found := false
		Headers(k.field(textHeaders)).each(func(name, value []byte) bool {
			found = string(name) == h.name && h.re.Match(value)
			return !found
		})
		if !found {
			return false
		}
	}
	return true
}

// MaxRefuted bounds the entries a refuted verification's answer carries:
// the newest that many of those matched.
const MaxRefuted = 100

// Result is what a verification found. Failed says which condition did
// not hold; "" when all did. Entries are the newest MaxRefuted matched
// when it failed, Omitted how many older ones matched beyond them.
type Result struct {
	Matched int       `json:"matched"`
	GapsMS  []float64 `json:"gaps_ms"`
	Entries []*Entry  `json:"-"`
	Omitted int       `json:"-"`
	Failed  string    `json:"-"`
}

// Verify checks the entries visible to the caller.
func (j *Journal) Verify(v *Verification, visible func(proxy string) bool) *Result {
	var matched []*kept
	for _, k := range j.kept() {
		if visible(k.proxy()) && v.matches(k) {
			matched = append(matched, k)
		}
	}
	res := v.verify(matched)
	if res.Failed != "" {
		shown := matched[len(matched)-min(len(matched), MaxRefuted):]
		res.Omitted = len(matched) - len(shown)
		for _, k := range shown {
			res.Entries = append(res.Entries, k.entry())
		}
	}
	return res
}

// verify checks what must hold of the entries matched, oldest first.
func (v *Verification) verify(matched []*kept) *Result {
	res := &Result{Matched: len(matched), GapsMS: []float64{}, Entries: []*Entry{}}
	for i := 1; i < len(matched); i++ {
		gap := time.Duration(matched[i].unixNano - matched[i-1].unixNano)
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
	if v.SameHeader != "" && len(matched) > 0 {
		first := Headers(matched[0].field(textHeaders)).Get(v.SameHeader)
		for i, k := range matched {
			if got := Headers(k.field(textHeaders)).Get(v.SameHeader); got != first || got == "" {
				res.Failed = fmt.Sprintf("same_header: request %d carries %s %q, request 1 %q", i+1, v.SameHeader, got, first)
				return res
			}
		}
	}
	return res
}
