package journal

import (
	"bytes"
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
	resumed   bool      // afterSeq was set, 0 included (ResumeAt)
	limit     int       // 0: not given
}

// Widened is f without its since and with the largest limit: what each
// replica of a fleet lists, since and limit applying after the merge.
func (f *Filter) Widened() *Filter {
	g := *f
	g.since, g.sinceTime, g.limit = "", time.Time{}, MaxLimit
	return &g
}

// Since is what since says: a time, or an entry's id.
func (f *Filter) Since() (time.Time, string) { return f.sinceTime, f.since }

// Limit is how many entries an answer holds at most.
func (f *Filter) Limit() int {
	if f.limit == 0 {
		return DefaultLimit
	}
	return f.limit
}

// One answer of the list holds at most limit entries: DefaultLimit
// unless the query says, at most MaxLimit.
const (
	DefaultLimit = 1000
	MaxLimit     = 10000
)

// filterParams are the parameters a filter reads.
var filterParams = []string{"proxy", "mock", "method", "path", "session", "since", "limit"}

// ParseFilter reads a query: limit is 1..MaxLimit. Every parameter is
// given at most once; an unknown one is refused.
func ParseFilter(q url.Values) (*Filter, error) {
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
		if err != nil || n < 1 || n > MaxLimit {
			return nil, &ParamError{"limit", fmt.Sprintf("%q is not a number from 1 to %d", l[0], MaxLimit)}
		}
		f.limit = n
	}
	return f, nil
}

// Replays reports whether a stream under this filter begins with kept
// entries (since or limit given) rather than only new ones.
func (f *Filter) Replays() bool {
	return f.since != "" || !f.sinceTime.IsZero() || f.limit != 0 || f.afterSeq != 0 || f.resumed
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

// ResumeAt makes a stream begin after the position seq, as a fleet's
// stream names each replica's (a Subscriber's Start, or an entry's Seq):
// the entries recorded after it. It reports false when some of them are
// no longer kept (the oldest kept is newer than the one after seq), or
// when seq is past newest, the order of the newest recorded (then the
// stream carries only new entries).
func (f *Filter) ResumeAt(seq, newest uint64, entries []*Entry) (known bool) {
	if seq > newest {
		return false
	}
	f.afterSeq, f.resumed = seq, true
	return len(entries) == 0 || entries[0].seq <= seq+1
}

// After is f selecting the entries recorded after t, all of them up to
// MaxLimit, without since: what a fleet's stream replays of a replica it
// has no position of.
func (f *Filter) After(t time.Time) *Filter {
	g := *f
	g.since, g.sinceTime, g.limit = "", t, MaxLimit
	return &g
}

// Matches reports whether an entry the journal made passes the filter's
// fields (not since nor limit, which select from a list).
func (f *Filter) Matches(e *Entry) bool { return e.k != nil && f.matches(e.k) }

// matches reads the kept bytes: a filter over the whole journal copies
// nothing of the entries it passes over.
func (f *Filter) matches(k *kept) bool {
	switch {
	case f.Proxy != "" && string(k.field(textProxy)) != f.Proxy,
		f.Mock != "" && (!k.has(flagMock) || string(k.field(textMock)) != f.Mock),
		f.Method != "" && !bytes.EqualFold(k.field(textMethod), []byte(f.Method)),
		f.Session != "" && string(k.field(textSession)) != f.Session,
		f.Path != nil && !f.Path.Match(k.field(textPath)):
		return false
	}
	return true
}

// Select picks from entries the journal made (oldest first) those
// visible and matching, after since, the newest limit of them (all when
// limit was not given).
func (f *Filter) Select(entries []*Entry, visible func(proxy string) bool) ([]*Entry, error) {
	ks := make([]*kept, len(entries))
	for i, e := range entries {
		ks[i] = e.k
	}
	idx, _, err := f.pick(ks, visible, f.limit)
	if err != nil {
		return nil, err
	}
	out := make([]*Entry, len(idx))
	for i, at := range idx {
		out[i] = entries[at]
	}
	return out, nil
}

// pick is where in ks (oldest first) the entries visible and matching
// are, after since, the newest limit of them (all when 0), and how many
// older ones matched beyond them. It holds at most limit places.
func (f *Filter) pick(ks []*kept, visible func(proxy string) bool, limit int) (idx []int, more int, err error) {
	start := 0
	if f.since != "" {
		// The newest entry of that id: a retry reuses its id.
		start = -1
		for j := len(ks) - 1; j >= 0; j-- {
			if string(ks[j].field(textID)) == f.since && visible(ks[j].proxy()) {
				start = j + 1
				break
			}
		}
		if start < 0 {
			return nil, 0, &ParamError{"since", fmt.Sprintf("%q is neither an RFC 3339 time nor the id of an entry kept", f.since)}
		}
	}
	matched := 0
	room := len(ks) - start
	if limit > 0 {
		room = min(limit, room)
	}
	idx = make([]int, 0, room)
	for i := start; i < len(ks); i++ {
		k := ks[i]
		if !f.sinceTime.IsZero() && !time.Unix(0, k.unixNano).After(f.sinceTime) || k.seq <= f.afterSeq {
			continue
		}
		if !visible(k.proxy()) || !f.matches(k) {
			continue
		}
		if limit > 0 && len(idx) == limit {
			idx[matched%limit] = i // over the oldest kept
		} else {
			idx = append(idx, i)
		}
		matched++
	}
	if limit > 0 && matched > limit {
		r := matched % limit
		idx = slices.Concat(idx[r:], idx[:r])
	}
	return idx, matched - len(idx), nil
}
