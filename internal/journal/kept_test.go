package journal

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

// TestAnEntryIsWhatWasRecorded: every field of a record comes back from
// the kept form, the secrets masked, a header's values in their order.
func TestAnEntryIsWhatWasRecorded(t *testing.T) {
	j := New(doc(t, "journal: {bodies: 4}\n"))
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	rec := &telemetry.Exchange{
		RequestID: "r-1", Proxy: "zeta", Mock: "m", Method: "POST", Path: "/pay", Query: "a=1&b", Client: "10.0.0.7",
		Status: 503, Duration: 1500 * time.Microsecond, LatencyWaited: time.Millisecond,
		UpstreamAnswered: true, UpstreamDuration: 250 * time.Microsecond, Faults: []string{"loss", "bandwidth"},
		RequestHeader:  http.Header{"Accept": {"a", "b"}, "Authorization": {"Bearer s"}, "X-Empty": {""}},
		ResponseHeader: http.Header{"Set-Cookie": {"sid=1"}, "Content-Type": {"text/plain"}},
		RequestBody:    &telemetry.Capture{Limit: 4, Bytes: []byte("\xff\x00ab"), Cut: true},
		ResponseBody:   &telemetry.Capture{Limit: 4, Bytes: []byte("ok")},
	}
	j.Active().Record(rec, at)
	es := j.Entries()
	if len(es) != 1 {
		t.Fatalf("%d entries", len(es))
	}
	got, err := json.Marshal(es[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"r-1","time":"2026-12-01T10:00:00.123456789Z","proxy":"zeta","mock":"m","session":null,` +
		`"method":"POST","path":"/pay","query":"a=1\u0026b",` +
		`"headers":{"Accept":["a","b"],"Authorization":["***"],"X-Empty":[""]},` +
		`"body":{"base64":"/wBhYg=="},"body_truncated":true,"status":503,` +
		`"response_headers":{"Content-Type":["text/plain"],"Set-Cookie":["***"]},"headers_cut":false,` +
		`"response_body":"ok","response_body_truncated":false,` +
		`"fault":{"replace":true,"loss":true,"abort":null,"hang":false,"bandwidth":true,"latency_ms":1},` +
		`"duration_ms":1.5,"upstream_ms":0.25,"client":"10.0.0.7","tunnel":null}`
	if string(got) != want {
		t.Errorf("entry\n%s\nwant\n%s", got, want)
	}

	// Nothing of the kind: null mock and upstream, empty bodies.
	j.Active().Record(&telemetry.Exchange{RequestID: "r-2", Proxy: "zeta", Method: "GET", Path: "/", Status: 200}, at)
	e := j.Entries()[1]
	if e.Mock != nil || e.UpstreamMS != nil || e.Fault.Replace || e.Fault.Loss || len(e.Body) != 0 || e.Headers.Get("Accept") != "" {
		t.Errorf("an entry with nothing recorded: %+v", e)
	}

	// A tunnel: what it relayed, kept apart from the record.
	tun := &telemetry.Tunnel{Up: 12, Down: 1 << 33, Duration: 2500 * time.Microsecond}
	j.Active().Record(&telemetry.Exchange{RequestID: "r-3", Proxy: "zeta", Method: "GET", Path: "/ws", Status: 101, Tunnel: tun}, at)
	tun.Up = 99
	if got := j.Entries()[2].Tunnel; got == nil || *got != (Tunnel{BytesUp: 12, BytesDown: 1 << 33, DurationMS: 2.5}) {
		t.Errorf("a tunnel's entry: %+v", got)
	}
}
