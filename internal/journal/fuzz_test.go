package journal

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParse: whatever a caller sends as a filter query, a stream's
// Last-Event-ID or a verification body is refused with an error or used,
// never a panic.
func FuzzParse(f *testing.F) {
	f.Add("proxy=zeta&path=^/orders&limit=2", `{"match": {"path": "^/pay$"}, "count": {"max": 4}}`, "1")
	f.Add("since=2030-01-01T00:00:00Z", `{"gaps_ms": {"min": 100}, "same_header": "Idempotency-Key"}`, "")
	f.Add("session=s-1", `{"match": {"session": "s-1"}}`, "18446744073709551615")
	f.Fuzz(func(t *testing.T, query, body, lastEventID string) {
		j := New(doc(t, "journal: {size: 4}\n"))
		record(j, "a", "zeta", "/orders/1", time.Now(), nil)
		all := func(string) bool { return true }
		if q, err := url.ParseQuery(query); err == nil {
			if fl, err := ParseFilter(q); err == nil {
				fl.Resume(lastEventID, j.Entries(), all)
				_, _ = fl.Select(j.Entries(), all)
			}
		}
		if v, err := ParseVerification([]byte(body)); err == nil {
			_ = j.Verify(v, all)
		}
	})
}

// FuzzHeadersCut: whatever headers a client or an upstream sends, and any
// journal.headers, the entry keeps at most that many bytes of names and
// values, each kept value is what was sent or a cut of it ending with the
// mark, and the kept form reads back without a panic.
func FuzzHeadersCut(f *testing.F) {
	f.Add("Accept", "*/*", "X-Big", "ééééééééé", 3, 20)
	f.Add("Authorization", "Bearer secret", "Idempotency-Key", "order-1", 1, 16)
	f.Add("", "", "X", "", 100, 0)
	f.Fuzz(func(t *testing.T, name1, value1, name2, value2 string, repeat, limit int) {
		limit = max(limit, 0) % (1 << 12)
		repeat = max(repeat, 0) % 64
		h := http.Header{}
		h[name1] = append(h[name1], value1)
		for range repeat {
			h[name2] = append(h[name2], value2)
		}
		secret := []string{"Authorization"}
		p := planFlat(h, secret, limit)
		b := Headers(p.append(make([]byte, 0, p.size), h, secret))
		if len(b) != p.size {
			t.Fatalf("planned %d bytes, kept %d", p.size, len(b))
		}
		sent := map[string][]string{}
		for n, vs := range h {
			if n == "Authorization" {
				vs = slices.Repeat([]string{Masked}, len(vs))
			}
			sent[n] = vs
		}
		total := 0
		b.scan(func(name, value []byte, cut bool) bool {
			total += len(name) + len(value)
			n, v := string(name), string(value)
			switch {
			case cut && n == "":
			case cut && strings.HasSuffix(v, CutMark) && slices.ContainsFunc(sent[n], func(s string) bool { return strings.HasPrefix(s, strings.TrimSuffix(v, CutMark)) }):
			case cut && v == "" && strings.HasSuffix(n, CutMark):
			case !cut && slices.Contains(sent[n], v):
			default:
				t.Fatalf("kept %q: %q (cut %v), not what was sent: %q", n, v, cut, h)
			}
			return true
		})
		if total > limit {
			t.Fatalf("%d bytes kept over the limit of %d", total, limit)
		}
		_ = b.Header()
		_, _ = b.Cut()
	})
}
