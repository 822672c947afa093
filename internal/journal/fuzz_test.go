package journal

import (
	"net/url"
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
			if fl, err := ParseFilter(q, j.Size()); err == nil {
				fl.Resume(lastEventID, j.Entries(), all)
				_, _ = fl.Select(j.Entries(), all)
			}
		}
		if v, err := ParseVerification([]byte(body)); err == nil {
			_ = v.Verify(j.Entries(), all)
		}
	})
}
