package journal

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

func doc(t testing.TB, journal string) *config.Document {
	t.Helper()
	d, err := config.Load([]byte("server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081, auth: {header: X-Admin}}\n" + journal))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func record(j *Journal, id, proxy, path string, at time.Time, header http.Header) {
	rec := &telemetry.Exchange{RequestID: id, Proxy: proxy, Method: "GET", Path: path, Status: 200, RequestHeader: header}
	j.Active().Record(rec, at)
}

func ids(es []*Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.ID)
	}
	return strings.Join(s, ",")
}

// TestRingKeepsTheNewest: the ring keeps exactly the newest size entries,
// oldest first, and counts what it forgot.
func TestRingKeepsTheNewest(t *testing.T) {
	j := New(doc(t, "journal: {size: 3}\n"))
	t0 := time.Now()
	for i := range 5 {
		record(j, fmt.Sprint(i), "zeta", "/", t0.Add(time.Duration(i)), nil)
	}
	if got := ids(j.Entries()); got != "2,3,4" {
		t.Errorf("entries %s, want 2,3,4", got)
	}
	if j.Dropped() != 2 {
		t.Errorf("dropped %d, want 2", j.Dropped())
	}
	// Resizing keeps the newest that fit; growing keeps them all.
	j.Configure(doc(t, "journal: {size: 2}\n"))
	if got := ids(j.Entries()); got != "3,4" {
		t.Errorf("after shrinking: %s", got)
	}
	j.Configure(doc(t, "journal: {size: 10}\n"))
	record(j, "5", "zeta", "/", t0.Add(5), nil)
	if got := ids(j.Entries()); got != "3,4,5" {
		t.Errorf("after growing: %s", got)
	}
	j.Configure(doc(t, "journal: {size: 0}\n"))
	if j.Active() != nil || len(j.Entries()) != 0 {
		t.Error("size 0 still records")
	}
	var off *Journal
	if off.Active() != nil {
		t.Error("a nil journal records")
	}
}

// TestAReloadKeepsEveryEntry: a reload that keeps the size (any saved
// proxy) neither overwrites the oldest entry nor counts one dropped.
func TestAReloadKeepsEveryEntry(t *testing.T) {
	j := New(doc(t, "journal: {size: 5}\n"))
	t0 := time.Now()
	for i := range 3 {
		record(j, fmt.Sprint(i), "zeta", "/", t0.Add(time.Duration(i)), nil)
	}
	j.Configure(doc(t, "journal: {size: 5}\n"))
	record(j, "3", "zeta", "/", t0.Add(3), nil)
	if got := ids(j.Entries()); got != "0,1,2,3" || j.Dropped() != 0 {
		t.Errorf("entries %s, %d dropped; want 0,1,2,3 and none", got, j.Dropped())
	}
}

// TestConcurrentRecording: many goroutines record at once (run with
// -race); nothing is lost below the size.
func TestConcurrentRecording(t *testing.T) {
	j := New(doc(t, "journal: {size: 1000}\n"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				record(j, fmt.Sprintf("%d-%d", g, i), "zeta", "/", time.Now(), nil)
			}
		})
	}
	wg.Wait()
	if n := len(j.Entries()); n != 800 {
		t.Errorf("%d entries, want 800", n)
	}
}

// TestSecretsAreMasked: the admin auth header, Authorization,
// Proxy-Authorization and Cookie are *** unless reveal lists them.
func TestSecretsAreMasked(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer s1"}, "X-Admin": {"Bearer s2"}, "Cookie": {"a=b"},
		"Proxy-Authorization": {"Basic s3"}, "Accept": {"*/*"}}
	j := New(doc(t, "journal: {reveal: [cookie]}\n"))
	record(j, "1", "zeta", "/", time.Now(), h)
	e := j.Entries()[0]
	for _, name := range []string{"Authorization", "X-Admin", "Proxy-Authorization"} {
		if got := e.Headers.Get(name); got != Masked {
			t.Errorf("%s kept as %q", name, got)
		}
	}
	if e.Headers.Get("Cookie") != "a=b" || e.Headers.Get("Accept") != "*/*" {
		t.Errorf("revealed or plain headers changed: %v", e.Headers)
	}
	if h.Get("Authorization") != "Bearer s1" {
		t.Error("masking changed the request's own headers")
	}
}

func TestFilters(t *testing.T) {
	j := New(doc(t, ""))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	record(j, "a", "zeta", "/orders/1", t0, nil)
	record(j, "b", "alpha", "/orders/2", t0.Add(time.Second), nil)
	record(j, "c", "zeta", "/users/3", t0.Add(2*time.Second), nil)
	record(j, "d", "zeta", "/orders/4", t0.Add(3*time.Second), nil)
	all := func(string) bool { return true }
	for _, c := range []struct{ query, want string }{
		{"", "a,b,c,d"},
		{"proxy=zeta", "a,c,d"},
		{"path=^/orders", "a,b,d"},
		{"since=b", "c,d"},
		{"since=2030-01-01T00:00:01Z", "c,d"},
		{"limit=2", "c,d"},
		{"proxy=zeta&path=orders&limit=1", "d"},
		{"method=get&since=a", "b,c,d"},
	} {
		q, _ := url.ParseQuery(c.query)
		f, err := ParseFilter(q)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		got, err := f.Select(j.Entries(), all)
		if err != nil || ids(got) != c.want {
			t.Errorf("%s: %s %v, want %s", c.query, ids(got), err, c.want)
		}
	}
	// Entries of proxies the caller may not read are not shown, nor
	// usable as since.
	f, _ := ParseFilter(url.Values{"since": {"b"}})
	if _, err := f.Select(j.Entries(), func(p string) bool { return p == "zeta" }); err == nil {
		t.Error("since named an entry the caller may not read")
	}
	for _, c := range []struct{ query, param string }{
		{"path=(", "path"}, {"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=x", "limit"},
		{"color=red", "color"}, {"proxy=a&proxy=b", "proxy"},
	} {
		q, _ := url.ParseQuery(c.query)
		_, err := ParseFilter(q)
		if pe, ok := err.(*ParamError); !ok || pe.Param != c.param {
			t.Errorf("%s: %v, want an error naming %s", c.query, err, c.param)
		}
	}
	q, _ := url.ParseQuery("since=nobody")
	f, _ = ParseFilter(q)
	if _, err := f.Select(j.Entries(), all); err == nil || err.(*ParamError).Param != "since" {
		t.Errorf("an unknown since: %v", err)
	}
}

func TestVerify(t *testing.T) {
	j := New(doc(t, ""))
	t0 := time.Now()
	key := func(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }
	record(j, "1", "zeta", "/pay", t0, key("k1"))
	record(j, "2", "zeta", "/pay", t0.Add(150*time.Millisecond), key("k1"))
	record(j, "3", "zeta", "/pay", t0.Add(400*time.Millisecond), key("k1"))
	record(j, "4", "zeta", "/other", t0.Add(450*time.Millisecond), key("k2"))
	all := func(string) bool { return true }
	for _, c := range []struct{ body, failed string }{
		{`{"match": {"path": "^/pay$"}, "count": {"min": 1, "max": 4}, "gaps_ms": {"min": 100}, "same_header": "Idempotency-Key"}`, ""},
		{`{"match": {"path": "^/pay$"}, "count": {"max": 2}}`, "count:"},
		{`{"match": {"path": "^/pay$"}, "count": {"min": 4}}`, "count:"},
		{`{"match": {"path": "^/pay$"}, "gaps_ms": {"min": 200}}`, "gaps_ms:"},
		{`{"match": {"path": "^/pay$"}, "gaps_ms": {"max": 200}}`, "gaps_ms:"},
		{`{"match": {"method": "GET"}, "same_header": "Idempotency-Key"}`, "same_header:"},
		{`{"match": {"headers": {"Idempotency-Key": "^k2$"}}, "count": {"min": 1, "max": 1}}`, ""},
	} {
		v, err := ParseVerification([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		res := j.Verify(v, all)
		if !strings.HasPrefix(res.Failed, c.failed) || (c.failed == "") != (res.Failed == "") {
			t.Errorf("%s: failed %q, want %q", c.body, res.Failed, c.failed)
		}
	}
	for _, c := range []struct{ body, param string }{
		{`{"match": {"path": "("}}`, "match.path"},
		{`{"match": {"headers": {"X": "("}}}`, "match.headers.X"},
		{`{"count": {"min": 3, "max": 1}}`, "count"},
		{`{"cuont": {}}`, "cuont"},
		{`{"match": {"pth": "x"}}`, "pth"},
		{`{} {}`, "body"},
	} {
		_, err := ParseVerification([]byte(c.body))
		if pe, ok := err.(*ParamError); !ok || pe.Param != c.param {
			t.Errorf("%s: %v, want an error naming %s", c.body, err, c.param)
		}
	}
}

func TestBodyForms(t *testing.T) {
	for _, c := range []struct {
		b    Body
		want string
	}{{Body("héllo"), `"héllo"`}, {Body{0xff, 0x00}, `{"base64":"/wA="}`}} {
		got, _ := c.b.MarshalJSON()
		if string(got) != c.want {
			t.Errorf("%q: %s, want %s", c.b, got, c.want)
		}
	}
}

// TestEntriesAreFilteredBySession: the session filter and a
// verification's match.session select a session's entries only.
func TestEntriesAreFilteredBySession(t *testing.T) {
	j := New(doc(t, ""))
	for i, sess := range []string{"t1", "", "t2", "t1"} {
		j.Active().Record(&telemetry.Exchange{RequestID: fmt.Sprint(i), Proxy: "zeta", Method: "GET", Path: "/", Status: 200, Session: sess}, time.Now())
	}
	f, err := ParseFilter(url.Values{"session": {"t1"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.Select(j.Entries(), func(string) bool { return true })
	if ids(got) != "0,3" || *got[0].Session != "t1" {
		t.Errorf("session t1: %s", ids(got))
	}
	v, err := ParseVerification([]byte(`{"match": {"session": "t2"}, "count": {"min": 1, "max": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if res := j.Verify(v, func(string) bool { return true }); res.Matched != 1 {
		t.Errorf("verify in t2: %+v", res)
	}
	if e := j.Entries()[1]; e.Session != nil {
		t.Errorf("an entry in no session: %v", *e.Session)
	}
}

// TestAnAnswersCookiesAreMasked: Set-Cookie is kept as Masked unless
// revealed.
func TestAnAnswersCookiesAreMasked(t *testing.T) {
	for cfg, want := range map[string]string{"": Masked, "journal: {reveal: [set-cookie]}\n": "sid=s4"} {
		j := New(doc(t, cfg))
		rec := &telemetry.Exchange{RequestID: "1", Proxy: "zeta", Method: "GET", Path: "/",
			ResponseHeader: http.Header{"Set-Cookie": {"sid=s4"}, "Content-Type": {"text/plain"}}}
		j.Active().Record(rec, time.Now())
		e := j.Entries()[0]
		if got := e.ResponseHeaders.Get("Set-Cookie"); got != want || e.ResponseHeaders.Get("Content-Type") != "text/plain" {
			t.Errorf("%q: Set-Cookie kept as %q, want %q", cfg, got, want)
		}
	}
}
