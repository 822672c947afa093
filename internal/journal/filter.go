package journal

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParamError is a filter or verification the caller got wrong, naming the
// parameter or key.
type ParamError struct {
	Param  string
	Reason string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Reason }

// Filter selects entries, as GET /api/v1/requests reads its query.
type Filter struct {
	Proxy, Mock, Method, Session string
	Path                         *regexp.Regexp // unanchored, as a mock's url

	since     string    // an entry's id, when sinceTime is zero
	sinceTime time.Time // exclusive
	afterSeq  uint64    // a stream resumed after the entry of this order (Resume)
	limit     int       // 0: all
}

// filterParams are the parameters a filter reads.
var filterParams = []string{"proxy", "mock", "method", "path", "session", "since", "limit"}

// ParseFilter reads a query. size is the journal's: limit is 1..size.
// Every parameter is given at most once; an unknown one is refused.
func ParseFilter(q url.Values, size int) (*Filter, error) {
	f := &Filter{}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(filterParams, k) {
			return nil, &ParamError{k, "unknown parameter; the filters are " + strings.Join(filterParams, ", ")}
		}
		if len(q[k]) > 1 {
			return nil, &ParamError{k, "given more than once"}
		}
	}
	f.Proxy, f.Mock, f.Method, f.Session = q.Get("proxy"), q.Get("mock"), q.Get("method"), q.Get("session")
	if p := q.Get("path"); p != "" {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, &ParamError{"path", "not a regular expression: " + err.Error()}
		}
		f.Path = re
	}
	if s := q.Get("since"); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			f.sinceTime = t
		} else {
			f.since = s
		}
	}
	if l, ok := q["limit"]; ok {
		n, err := strconv.Atoi(l[0])
		if err != nil || n < 1 || n > size {
			return nil, &ParamError{"limit", fmt.Sprintf("%q is not a number from 1 to %d (journal.size)", l[0], size)}
		}
		f.limit = n
	}
	return f, nil
}

// Replays reports whether a stream under this filter begins with kept
// entries (since or limit given) rather than only new ones.
func (f *Filter) Replays() bool {
	return f.since != "" || !f.sinceTime.IsZero() || f.limit != 0 || f.afterSeq != 0
}

// Resume makes a stream without since begin after the event of that id
// (an entry's Seq), as an EventSource that reconnects names the last
// event it received (Last-Event-ID). An event no longer kept resumes
// nothing: the stream carries only new entries, and says so.
func (f *Filter) Resume(id string, entries []*Entry, visible func(proxy string) bool) (known bool) {
	if id == "" || f.since != "" || !f.sinceTime.IsZero() {
		return true
	}
	seq, err := strconv.ParseUint(id, 10, 64)
	if err != nil || !slices.ContainsFunc(entries, func(e *Entry) bool { return e.seq == seq && visible(e.Proxy) }) {
		return false
	}
	f.afterSeq = seq
	return true
}

// Matches reports whether an entry passes the filter's fields (not since
// nor limit, which select from a list).
func (f *Filter) Matches(e *Entry) bool {
	switch {
	case f.Proxy != "" && e.Proxy != f.Proxy,
		f.Mock != "" && (e.Mock == nil || *e.Mock != f.Mock),
		f.Method != "" && !strings.EqualFold(e.Method, f.Method),
		f.Session != "" && (e.Session == nil || *e.Session != f.Session),
		f.Path != nil && !f.Path.MatchString(e.Path):
		return false
	}
	return true
}

// Select picks from entries (oldest first) those visible and matching,
// after since, the newest limit of them.
func (f *Filter) Select(entries []*Entry, visible func(proxy string) bool) ([]*Entry, error) {
	if f.since != "" {
		i := slices.IndexFunc(entries, func(e *Entry) bool { return e.ID == f.since && visible(e.Proxy) })
		if i < 0 {
			return nil, &ParamError{"since", fmt.Sprintf("%q is neither an RFC 3339 time nor the id of an entry kept", f.since)}
		}
		// The newest entry of that id: a retry reuses its id.
		for j := len(entries) - 1; j > i; j-- {
			if entries[j].ID == f.since && visible(entries[j].Proxy) {
				i = j
				break
			}
		}
		entries = entries[i+1:]
	}
	out := []*Entry{}
	for _, e := range entries {
		if !f.sinceTime.IsZero() && !e.Time.After(f.sinceTime) || e.seq <= f.afterSeq {
			continue
		}
		if visible(e.Proxy) && f.Matches(e) {
			out = append(out, e)
		}
	}
	if f.limit > 0 && len(out) > f.limit {
		out = out[len(out)-f.limit:]
	}
	return out, nil
}
