package journal

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// keptBytes is what headers hold of journal.headers: names and values.
func keptBytes(h http.Header) int {
	n := 0
	for name, vs := range h {
		for _, v := range vs {
			n += len(name) + len(v)
		}
	}
	return n
}

// TestHeadersAreCutAtTheirBound: headers within journal.headers are kept
// whole; past it the smallest names are kept whole, the value the bound
// falls in is cut with the mark (never inside a character), the rest is
// left out, and the entry says headers_cut. A secret counts as its mask.
func TestHeadersAreCutAtTheirBound(t *testing.T) {
	j := New(doc(t, "journal: {headers: 64}\n"))
	small := http.Header{"Accept": {"*/*"}, "Authorization": {strings.Repeat("s", 500)}}
	j.Active().Record(&telemetry.Exchange{RequestID: "whole", Proxy: "zeta", Method: "GET", Path: "/", RequestHeader: small, ResponseHeader: http.Header{"Set-Cookie": {strings.Repeat("s", 500)}}}, time.Now())
	big := http.Header{
		"Accept":          {"*/*"},                      // 9 bytes
		"Idempotency-Key": {"order-1"},                  // 22
		"A-Padding":       {strings.Repeat("é", 100)},   // 209: cut
		"B-Padding":       {strings.Repeat("x", 1000)},  // left out
		"Authorization":   {strings.Repeat("s", 10000)}, // 16, as ***
	}
	j.Active().Record(&telemetry.Exchange{RequestID: "cut", Proxy: "zeta", Method: "GET", Path: "/", RequestHeader: big}, time.Now())
	es := j.Entries()
	if es[0].HeadersCut || es[0].Headers.Get("Authorization") != Masked || es[0].Headers.Get("Accept") != "*/*" {
		t.Errorf("headers within the bound: cut %v, %v", es[0].HeadersCut, es[0].Headers.Header())
	}
	e := es[1]
	got := e.Headers.Header()
	if !e.HeadersCut || keptBytes(got) > 64 {
		t.Errorf("cut %v, %d bytes kept: %v", e.HeadersCut, keptBytes(got), got)
	}
	if got.Get("Accept") != "*/*" || got.Get("Idempotency-Key") != "order-1" || got.Get("Authorization") != Masked {
		t.Errorf("the small headers are not kept whole: %v", got)
	}
	pad := got.Get("A-Padding")
	// 64 less the 47 of the three smaller, the name and the mark: 5 bytes,
	// two characters.
	if pad != "éé"+CutMark {
		t.Errorf("the value the bound falls in: %q", pad)
	}
	if _, ok := got["B-Padding"]; ok {
		t.Errorf("a header past the bound is kept: %v", got)
	}
	if names, leftOut := e.Headers.Cut(); !slices.Equal(names, []string{"A-Padding"}) || !leftOut {
		t.Errorf("Cut: %v %v", names, leftOut)
	}
	if names, leftOut := e.ResponseHeaders.Cut(); names != nil || leftOut {
		t.Errorf("the answer's headers, none: %v %v", names, leftOut)
	}

	// A name longer than the bound is cut, with the mark, its value gone.
	j.Active().Record(&telemetry.Exchange{RequestID: "name", Proxy: "zeta", Method: "GET", Path: "/",
		ResponseHeader: http.Header{strings.Repeat("N", 200): {"v"}}}, time.Now())
	e = j.Entries()[2]
	names, leftOut := e.ResponseHeaders.Cut()
	if !e.HeadersCut || len(names) != 1 || names[0] != strings.Repeat("N", 61)+CutMark || leftOut {
		t.Errorf("a long name: %v %v", names, leftOut)
	}

	// journal.headers 0 keeps none, and says so.
	j.Configure(doc(t, "journal: {headers: 0}\n"))
	j.Active().Record(&telemetry.Exchange{RequestID: "none", Proxy: "zeta", Method: "GET", Path: "/", RequestHeader: small}, time.Now())
	e = j.Entries()[3]
	if _, leftOut := e.Headers.Cut(); len(e.Headers.Header()) != 0 || !e.HeadersCut || !leftOut {
		t.Errorf("headers 0: %v, cut %v", e.Headers.Header(), e.HeadersCut)
	}
}

// TestVerifyMatchesWhatWasKept: a header cut in the journal matches on
// its kept part, not on what the client sent.
func TestVerifyMatchesWhatWasKept(t *testing.T) {
	j := New(doc(t, "journal: {headers: 40}\n"))
	record(j, "1", "zeta", "/pay", time.Now(), http.Header{"X-Trace": {"abcdefghijklmnopqrstuvwxyz0123456789"}})
	all := func(string) bool { return true }
	for body, matched := range map[string]int{
		`{"match": {"headers": {"x-trace": "^abcdefghijklmnopqrstuvwxyz0123456789$"}}}`: 0,
		`{"match": {"headers": {"x-trace": "^abcdefghijk"}}}`:                           1,
		`{"match": {"headers": {"x-trace": "…$"}}}`:                                     1,
	} {
		v, err := ParseVerification([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if res := j.Verify(v, all); res.Matched != matched {
			t.Errorf("%s: %d matched, want %d", body, res.Matched, matched)
		}
	}
}

// exchange is a record of about size bytes.
func exchange(id string, size int) *telemetry.Exchange {
	return &telemetry.Exchange{RequestID: id, Proxy: "zeta", Method: "POST", Path: "/",
		RequestBody: &telemetry.Capture{Limit: size, Bytes: bytes.Repeat([]byte("b"), size)}}
}

// used is what the ring's entries take, counted again.
func used(j *Journal) (counted, sum int64) {
	r := j.ring.Load()
	for _, k := range r.kept() {
		sum += k.size
	}
	return r.used.Load(), sum
}

// TestTheRingKeepsWithinItsBytes: journal.bytes bounds the ring beside
// size: it keeps the newest entries that fit, an entry evicted by either
// counts in dropped, a reload to a smaller budget evicts at once, and an
// entry over the budget is kept alone.
func TestTheRingKeepsWithinItsBytes(t *testing.T) {
	j := New(doc(t, "journal: {size: 100, bodies: 1Mi, bytes: 1Mi}\n"))
	for i := range 10 {
		j.Active().Record(exchange(fmt.Sprint(i), 240<<10), time.Now())
	}
	if got := ids(j.Entries()); got != "6,7,8,9" || j.Dropped() != 6 {
		t.Errorf("entries %s, %d dropped; want 6,7,8,9 and 6", got, j.Dropped())
	}
	if counted, sum := used(j); counted != sum || sum > 1<<20 {
		t.Errorf("used %d, the entries %d: over 1 MiB or miscounted", counted, sum)
	}
	// The count bounds it too, and counts as dropped the same.
	for i := range 200 {
		j.Active().Record(exchange(fmt.Sprint("s", i), 10), time.Now())
	}
	if n := len(j.Entries()); n != 100 || j.Dropped() != 110 {
		t.Errorf("%d entries, %d dropped; want 100 and 110", n, j.Dropped())
	}
	// A reload to a smaller size or budget keeps the newest that fit.
	j.Configure(doc(t, "journal: {size: 100, bodies: 1Mi, bytes: 1Mi}\n"))
	j.Active().Record(exchange("big", 900<<10), time.Now())
	es := j.Entries()
	if es[len(es)-1].ID != "big" {
		t.Fatalf("the newest is not kept: %s", ids(es))
	}
	if counted, sum := used(j); counted != sum || sum > 1<<20 {
		t.Errorf("used %d, the entries %d", counted, sum)
	}
	before := j.Dropped()
	kept := len(es)
	j.Configure(doc(t, "journal: {size: 10, bodies: 1Mi, bytes: 1Mi}\n"))
	if n := len(j.Entries()); n != 10 || j.Dropped() != before+uint64(kept-10) {
		t.Errorf("after shrinking to 10: %d entries, %d dropped (from %d of %d)", n, j.Dropped(), before, kept)
	}
	j.Active().Record(exchange("huge", 1<<20), time.Now())
	if got := ids(j.Entries()); got != "huge" {
		t.Errorf("an entry over the budget is not kept alone: %s", got)
	}
	// Clearing gives its bytes back.
	j.Clear(func(string) bool { return true })
	if counted, _ := used(j); counted != 0 {
		t.Errorf("%d bytes used after clearing", counted)
	}
}

// TestTheBudgetHoldsUnderConcurrentRecording: goroutines recording at
// once (run with -race) never leave the ring over its budget by more
// than what is in flight, and the bytes it counts are its entries'.
func TestTheBudgetHoldsUnderConcurrentRecording(t *testing.T) {
	j := New(doc(t, "journal: {size: 1000, bodies: 64Ki, bytes: 1Mi}\n"))
	var wg sync.WaitGroup
	const goroutines, each = 8, 200
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				j.Active().Record(exchange(fmt.Sprintf("%d-%d", g, i), 1+(i*7919)%(64<<10)), time.Now())
			}
		})
	}
	wg.Wait()
	counted, sum := used(j)
	if counted != sum || sum > 1<<20+goroutines*(64<<10+1024) {
		t.Errorf("used %d, the entries %d, budget 1 MiB", counted, sum)
	}
	if n := uint64(len(j.Entries())); n+j.Dropped() != goroutines*each {
		t.Errorf("%d kept and %d dropped of %d", n, j.Dropped(), goroutines*each)
	}
}

// TestAPageHoldsAtMostItsLimit: one answer holds the newest limit entries
// (1,000 unless the query says), oldest first, and counts the others.
func TestAPageHoldsAtMostItsLimit(t *testing.T) {
	j := New(doc(t, "journal: {size: 3000}\n"))
	t0 := time.Now()
	for i := range 2500 {
		proxy := "zeta"
		if i%2 == 1 {
			proxy = "alpha"
		}
		record(j, fmt.Sprint(i), proxy, "/", t0.Add(time.Duration(i)), nil)
	}
	all := func(string) bool { return true }
	for _, c := range []struct {
		query        string
		n, more      int
		first, last  string
		visibleProxy string
	}{
		{"", 1000, 1500, "1500", "2499", ""},
		{"limit=10000", 2500, 0, "0", "2499", ""},
		{"limit=3&proxy=zeta", 3, 1247, "2494", "2498", ""},
		{"limit=2", 2, 1248, "2496", "2498", "zeta"},
		{"since=2490&limit=4", 4, 5, "2496", "2499", ""},
	} {
		q, _ := url.ParseQuery(c.query)
		f, err := ParseFilter(q)
		if err != nil {
			t.Fatal(err)
		}
		visible := all
		if c.visibleProxy != "" {
			visible = func(p string) bool { return p == c.visibleProxy }
		}
		p, err := j.List(f, visible)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		_ = p.Each(func(e *Entry) error { got = append(got, e.ID); return nil })
		if p.Len() != c.n || len(got) != c.n || p.More != c.more || got[0] != c.first || got[len(got)-1] != c.last {
			t.Errorf("%q: %d entries (%s..%s), more %d; want %d (%s..%s), more %d", c.query, len(got), got[0], got[len(got)-1], p.More, c.n, c.first, c.last, c.more)
		}
	}
}

// TestARefutedVerificationCarriesTheNewest100: a verification that fails
// carries at most 100 of its matched entries, the newest, and counts the
// others; one that holds carries none.
func TestARefutedVerificationCarriesTheNewest100(t *testing.T) {
	j := New(doc(t, ""))
	t0 := time.Now()
	for i := range 250 {
		record(j, fmt.Sprint(i), "zeta", "/pay", t0.Add(time.Duration(i)*time.Millisecond), nil)
	}
	all := func(string) bool { return true }
	v, _ := ParseVerification([]byte(`{"match": {"path": "^/pay$"}, "count": {"max": 4}}`))
	res := j.Verify(v, all)
	if res.Failed == "" || res.Matched != 250 || len(res.Entries) != 100 || res.Omitted != 150 ||
		res.Entries[0].ID != "150" || res.Entries[99].ID != "249" || len(res.GapsMS) != 249 {
		t.Errorf("refuted: %q, matched %d, %d entries, %d omitted", res.Failed, res.Matched, len(res.Entries), res.Omitted)
	}
	v, _ = ParseVerification([]byte(`{"match": {"path": "^/pay$"}, "count": {"max": 3}, "gaps_ms": {"min": 5}}`))
	j.Clear(func(string) bool { return true })
	record(j, "a", "zeta", "/pay", t0, nil)
	record(j, "b", "zeta", "/pay", t0.Add(time.Millisecond), nil)
	if res := j.Verify(v, all); !strings.HasPrefix(res.Failed, "gaps_ms:") || len(res.Entries) != 2 || res.Omitted != 0 {
		t.Errorf("a few: %q, %d entries, %d omitted", res.Failed, len(res.Entries), res.Omitted)
	}
	v, _ = ParseVerification([]byte(`{"match": {"path": "^/pay$"}}`))
	if res := j.Verify(v, all); res.Failed != "" || len(res.Entries) != 0 {
		t.Errorf("held: %q, %d entries", res.Failed, len(res.Entries))
	}
}
