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
	Match      Match  `json:"match"`
	Count      *Range `json:"count"`
	GapsMS     *Range `json:"gaps_ms"`
	SameHeader string `json:"same_header"`
	// Local verifies the journal of the replica asked alone; Partial
	// verifies what the replicas that answered hold when some did not
	// (SPEC §18.1).
	Local   bool        `json:"local"`
	Partial bool        `json:"partial"`
	headers []headerPat // Match.Headers, compiled
	path    *regexp.Regexp
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
			return nil, &ParamError{unknown.Key, "unknown key; a verification has match, count, gaps_ms, same_header, local and partial"}
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
	points, newest := j.Matched(v, visible)
	res := v.Check(points)
	if res.Failed != "" {
		res.Entries, res.Omitted = newest, len(points)-len(newest)
	}
	return res
}

// A Point is what a verification reads of one entry it matched: when it
// came (Unix nanoseconds), its id, and its same_header value. A fleet's
// replicas send theirs to the one asked, which checks them all together.
type Point struct {
	Time int64  `json:"t"`
	ID   string `json:"id"`
	Same string `json:"same,omitempty"`
}

// Matched is the points of the entries visible that v matches, oldest
// first, and those entries' newest MaxRefuted, made.
func (j *Journal) Matched(v *Verification, visible func(proxy string) bool) (points []Point, newest []*Entry) {
	var matched []*kept
	for _, k := range j.kept() {
		if visible(k.proxy()) && v.matches(k) {
			matched = append(matched, k)
		}
	}
	points = make([]Point, len(matched))
	for i, k := range matched {
		points[i] = Point{Time: k.unixNano, ID: string(k.field(textID))}
		if v.SameHeader != "" {
			points[i].Same = Headers(k.field(textHeaders)).Get(v.SameHeader)
		}
	}
	for _, k := range matched[len(matched)-min(len(matched), MaxRefuted):] {
		newest = append(newest, k.entry())
	}
	return points, newest
}

// Check checks what must hold of the points matched, oldest first.
func (v *Verification) Check(points []Point) *Result {
	res := &Result{Matched: len(points), GapsMS: []float64{}, Entries: []*Entry{}}
	for i := 1; i < len(points); i++ {
		gap := time.Duration(points[i].Time - points[i-1].Time)
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
	if v.SameHeader != "" && len(points) > 0 {
		first := points[0].Same
		for i, p := range points {
			if p.Same != first || p.Same == "" {
				res.Failed = fmt.Sprintf("same_header: request %d carries %s %q, request 1 %q", i+1, v.SameHeader, p.Same, first)
				return res
			}
		}
	}
	return res
}
