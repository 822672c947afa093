package proxy

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// TestTheJournalKeepsABodyNothingRead: a mock that does not extract from
// the body still has it in its entry, also when its own answer is large
// enough that the server sends it while the handler runs (and would then
// discard what is left of the request body).
func TestTheJournalKeepsABodyNothingRead(t *testing.T) {
	big := strings.Repeat("x", 5000)
	doc, err := config.Load([]byte(oneProxy("http://127.0.0.1:9", `mocks:
  - name: small
    request: {method: POST, url: "^/small$"}
    response: {status: 200, body: "ok"}
  - name: big
    request: {method: POST, url: "^/big$"}
    response: {status: 200, body: "`+big+`"}
`)))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := runtime.Compile(doc)
	j := journal.New(doc)
	srv := httptest.NewServer(New(runtime.NewHolder(rt), Options{Journal: j}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/small", "/big"} {
		res, body := do(t, "POST", srv.URL+path, nil, strings.NewReader("hello-body"))
		if res.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
	}
	entries := j.Entries()
	if len(entries) != 2 {
		t.Fatalf("%d entries", len(entries))
	}
	for _, e := range entries {
		if string(e.Body) != "hello-body" {
			t.Errorf("%s: the journal kept body %q", e.Path, e.Body)
		}
	}
}
