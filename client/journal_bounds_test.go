package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

// TestTheJournalsBounds: the client reads what the journal's bounds
// leave: an entry's headers_cut, a list's more, a refuted verification's
// requests_omitted.
func TestTheJournalsBounds(t *testing.T) {
	s := doppeltest.New(t, doppeltest.Config{YAML: `
admin: {host: 127.0.0.1, port: 2}
journal: {headers: 128}
proxies:
- name: shop
  type: http
  url: http://127.0.0.1:9/
  mocks:
  - {name: hi, request: {method: GET, url: ^/hi$}, response: {status: 200, body: hi}}
`})
	c, ctx := s.Client, ctxFor(t)
	for i := range 105 {
		get(t, s.ProxyURL+"/hi", "X-Request-ID", fmt.Sprint("r-", i), "X-Pad", strings.Repeat("p", 100))
	}
	list, err := c.Requests(ctx, client.Filter{Limit: 5})
	if err != nil || len(list.Requests) != 5 || list.More != 100 {
		t.Fatalf("Requests limit 5: %d, more %d, %v", len(list.Requests), list.More, err)
	}
	if e := list.Requests[4]; e.ID != "r-104" || !e.HeadersCut || !strings.HasSuffix(e.Headers.Get("X-Pad"), "…") {
		t.Errorf("the newest entry: %s, cut %v, X-Pad %q", e.ID, e.HeadersCut, e.Headers.Get("X-Pad"))
	}
	_, err = c.Verify(ctx, client.Verification{Match: client.Match{Path: "^/hi$"}, Count: client.AtMost(1)})
	var failed *client.VerificationError
	if !errors.As(err, &failed) || failed.Matched != 105 || len(failed.Requests) != 100 || failed.RequestsOmitted != 5 || failed.Requests[0].ID != "r-5" {
		t.Errorf("a refuted verification: %v (%+v)", err, failed)
	}
}
