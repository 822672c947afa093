package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/client"
	"github.com/doppelproxy/doppel/doppeltest"
)

const viewerToken = "viewer-0123456789abcdef0123456789abcdef"

// shop is a Doppel with one proxy in front of a real backend, a mock
// answering from a template file, and a viewer token of the user group
// that may read and not write.
func shop(t *testing.T) (*doppeltest.Server, *httptest.Server) {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"path": "`+r.URL.Path+`"}`)
	}))
	t.Cleanup(backend.Close)
	s := doppeltest.New(t, doppeltest.Config{YAML: `
admin:
  host: 127.0.0.1
  port: 2
  upload: {limit: 64}
  tokens: [{name: viewer, group: user, token: ` + viewerToken + `}]
  access: {list: [admin, user], read: [admin, user]}
proxies:
- name: shop
  type: http
  url: ` + backend.URL + `
  mocks:
  - name: banner
    request: {method: GET, url: ^/banner$}
    response: {status: 200, template: banner.j2}
`})
	return s, backend
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxiesWithCompareAndSwap(t *testing.T) {
	s, backend := shop(t)
	c, ctx := s.Client, ctxFor(t)

	list, err := c.Proxies(ctx)
	if err != nil || len(list) != 1 || list[0].Proxy.Name != "shop" || len(list[0].Revision) != 16 {
		t.Fatalf("Proxies: %+v, %v", list, err)
	}
	p, rev, err := c.Proxy(ctx, "shop")
	if err != nil || rev != list[0].Revision || p.Timeout != 30 || p.Mocks[0].Response.Template != "banner.j2" {
		t.Fatalf("Proxy: %+v %q %v", p, rev, err)
	}

	extra := client.Proxy{Name: "extra", URL: backend.URL, Resolve: client.ByHeader("X-Backend"),
		Latency: &client.Latency{Percentage: 1, Min: 0.05, Max: 0.05}}
	created, err := c.CreateProxy(ctx, extra)
	if err != nil || len(created) != 16 {
		t.Fatalf("CreateProxy: %q %v", created, err)
	}
	if _, err := c.CreateProxy(ctx, extra); !errors.Is(err, client.ErrConflict) {
		t.Errorf("the same name again: %v, want ErrConflict", err)
	}
	var e *client.Error
	_, err = c.CreateProxy(ctx, client.Proxy{Name: "bad", URL: "ftp://x", Loss: &client.Loss{Percentage: 2, Status: 503}})
	if !errors.Is(err, client.ErrConfigInvalid) || !errors.As(err, &e) || e.Status != 400 ||
		!strings.Contains(e.Message, "url") || !strings.Contains(e.Message, "loss.percentage") || e.Operation != "createProxy" {
		t.Errorf("a bad proxy: %v, want CONFIG_INVALID naming url and loss.percentage", err)
	}
	// The latency is in force when CreateProxy returns.
	start := time.Now()
	if code, _ := get(t, s.ProxyURL+"/x", "X-Backend", "extra"); code != 200 || time.Since(start) < 50*time.Millisecond {
		t.Errorf("through extra: %d after %v", code, time.Since(start))
	}

	extra.Latency = nil
	updated, err := c.UpdateProxy(ctx, extra, created)
	if err != nil || updated == created {
		t.Fatalf("UpdateProxy: %q %v", updated, err)
	}
	if _, err := c.UpdateProxy(ctx, extra, created); !errors.Is(err, client.ErrRevisionMismatch) || !errors.As(err, &e) || e.Status != 409 {
		t.Errorf("a stale revision: %v, want ErrRevisionMismatch", err)
	}
	if _, err := c.UpdateProxy(ctx, extra, ""); !errors.Is(err, client.ErrRevisionRequired) {
		t.Errorf("no revision: %v, want ErrRevisionRequired", err)
	}
	extra.Name = "renamed"
	if _, err := c.RenameProxy(ctx, "extra", extra, updated); err != nil {
		t.Fatalf("RenameProxy: %v", err)
	}
	if _, _, err := c.Proxy(ctx, "extra"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the old name: %v, want ErrNotFound", err)
	}
	if err := c.DeleteProxy(ctx, "renamed"); err != nil {
		t.Fatalf("DeleteProxy: %v", err)
	}
	if err := c.DeleteProxy(ctx, "renamed"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleted twice: %v, want ErrNotFound", err)
	}
	if _, _, err := c.Proxy(ctx, "a/b"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a name with a slash: %v, want ErrNotFound, the name escaped", err)
	}
}

func TestAccessIsTyped(t *testing.T) {
	s, _ := shop(t)
	ctx := ctxFor(t)
	anonymous := client.New(s.AdminURL)
	if _, err := anonymous.Proxies(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("no token: %v, want ErrUnauthorized", err)
	}
	viewer := client.New(s.AdminURL, client.WithToken(viewerToken))
	if _, _, err := viewer.Proxy(ctx, "shop"); err != nil {
		t.Errorf("the viewer reads: %v", err)
	}
	if _, err := viewer.CreateProxy(ctx, client.Proxy{Name: "mine", URL: "http://127.0.0.1:9"}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("the viewer creates: %v, want ErrForbidden", err)
	}
	// The header admin.auth.header names works as well.
	header := client.New(s.AdminURL, client.WithToken(viewerToken), client.WithTokenHeader("X-Proxy-Authorization"))
	a, err := header.Access(ctx)
	if err != nil || a.Caller.Kind != "token" || a.Caller.Name != "viewer" || a.Global["create"] || !a.Proxies["shop"]["read"] {
		t.Errorf("Access: %+v %v", a, err)
	}
	if a, err := anonymous.Access(ctx); err != nil || a.Caller.Kind != "anonymous" || a.Proxies != nil {
		t.Errorf("anonymous Access: %+v %v", a, err)
	}
	st, err := anonymous.Status(ctx)
	if err != nil || len(st.Proxies) != 1 || st.Proxies[0].Resolve != "default" || st.Proxies[0].Mocks != 1 || len(st.Revision) != 16 {
		t.Errorf("Status: %+v %v", st, err)
	}
	if rs, err := anonymous.Replicas(ctx); err != nil || len(rs) != 1 || !rs[0].Self || rs[0].ID != st.Replica || rs[0].State != "live" || st.Fleet.Live != 1 {
		t.Errorf("Replicas: %+v %v (status %+v)", rs, err, st)
	}
	if schema, err := anonymous.Schema(ctx); err != nil || !strings.Contains(string(schema), `"proxies"`) {
		t.Errorf("Schema: %.80s %v", schema, err)
	}
	r, err := s.Client.Reload(ctx)
	if err != nil || r.Revision != st.Revision || r.Proxies != 1 {
		t.Errorf("Reload: %+v %v (status revision %s)", r, err, st.Revision)
	}
}

func TestTemplates(t *testing.T) {
	s, _ := shop(t)
	c, ctx := s.Client, ctxFor(t)
	if err := c.UploadTemplate(ctx, "shop", "banner.j2", strings.NewReader("sale {{ 1 + 1 }}")); err != nil {
		t.Fatalf("UploadTemplate: %v", err)
	}
	if code, body := get(t, s.ProxyURL+"/banner"); code != 200 || body != "sale 2" {
		t.Errorf("the mock: %d %q", code, body)
	}
	files, err := c.Templates(ctx, "shop")
	if err != nil || len(files) != 1 || files[0].Name != "banner.j2" || files[0].Size != 16 {
		t.Errorf("Templates: %+v %v", files, err)
	}
	if err := c.UploadTemplate(ctx, "shop", "other.j2", strings.NewReader("x")); !errors.Is(err, client.ErrTemplateNotDeclared) {
		t.Errorf("an undeclared file: %v, want ErrTemplateNotDeclared", err)
	}
	if err := c.UploadTemplate(ctx, "shop", "banner.j2", strings.NewReader(strings.Repeat("x", 65))); !errors.Is(err, client.ErrUploadTooLarge) {
		t.Errorf("over admin.upload.limit: %v, want ErrUploadTooLarge", err)
	}
	if err := c.DeleteTemplate(ctx, "shop", "banner.j2"); err != nil {
		t.Fatalf("DeleteTemplate: %v", err)
	}
	if files, err := c.Templates(ctx, "shop"); err != nil || len(files) != 0 {
		t.Errorf("Templates after delete: %+v %v", files, err)
	}
}

func TestTheJournal(t *testing.T) {
	s, _ := shop(t)
	c, ctx := s.Client, ctxFor(t)
	stream, err := c.StreamRequests(ctx, client.Filter{Proxy: "shop", Path: "^/orders"})
	if err != nil {
		t.Fatalf("StreamRequests: %v", err)
	}
	defer stream.Close()
	for range 3 {
		get(t, s.ProxyURL+"/orders/7?expand=1", "Idempotency-Key", "k-1", "Authorization", "Bearer secret")
		time.Sleep(20 * time.Millisecond)
	}
	get(t, s.ProxyURL+"/other")
	for i := range 3 {
		r, err := stream.Next()
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		if r.Path != "/orders/7" || r.Query != "expand=1" || r.Status != 200 || r.Headers.Get("Authorization") != "***" ||
			string(r.ResponseBody) != `{"path": "/orders/7"}` || r.UpstreamMS == nil || r.Mock != "" {
			t.Errorf("streamed entry %d: %+v", i, r)
		}
	}

	list, err := c.Requests(ctx, client.Filter{Proxy: "shop"})
	if err != nil || len(list.Requests) != 4 || list.Requests[3].Path != "/other" {
		t.Fatalf("Requests: %+v %v", list, err)
	}
	if last, err := c.Requests(ctx, client.Filter{Limit: 1, Method: "get"}); err != nil || len(last.Requests) != 1 || last.Requests[0].Path != "/other" {
		t.Errorf("Requests limit 1: %+v %v", last, err)
	}
	if since, err := c.Requests(ctx, client.Filter{Since: list.Requests[2].ID}); err != nil || len(since.Requests) != 1 {
		t.Errorf("Requests since the third: %+v %v", since, err)
	}
	if _, err := c.Requests(ctx, client.Filter{Path: "("}); !errors.Is(err, client.ErrConfigInvalid) {
		t.Errorf("a bad path regex: %v, want ErrConfigInvalid", err)
	}

	res, err := c.Verify(ctx, client.Verification{Match: client.Match{Path: "^/orders/7$", Headers: map[string]string{"Idempotency-Key": "^k-"}},
		Count: client.Exactly(3), GapsMS: client.AtLeast(15), SameHeader: "Idempotency-Key"})
	if err != nil || res.Matched != 3 || len(res.GapsMS) != 2 {
		t.Errorf("Verify: %+v %v", res, err)
	}
	_, err = c.Verify(ctx, client.Verification{Match: client.Match{Path: "^/orders"}, Count: client.AtMost(2)})
	var failed *client.VerificationError
	if !errors.Is(err, client.ErrVerificationFailed) || !errors.As(err, &failed) || failed.Matched != 3 ||
		len(failed.Requests) != 3 || !strings.Contains(failed.Message, "count") {
		t.Errorf("a failing verification: %v (%+v)", err, failed)
	}

	if err := c.ClearRequests(ctx, "shop"); err != nil {
		t.Fatalf("ClearRequests: %v", err)
	}
	if list, err := c.Requests(ctx, client.Filter{}); err != nil || len(list.Requests) != 0 {
		t.Errorf("after clearing: %+v %v", list, err)
	}
}

func TestCountersAndRecording(t *testing.T) {
	s, _ := shop(t)
	c, ctx := s.Client, ctxFor(t)
	p, rev, err := c.Proxy(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	p.Loss = &client.Loss{Percentage: 1, Status: 503, When: &client.When{
		Count: &client.Count{First: client.Ptr[int64](1)}, Per: &client.Per{Header: "Idempotency-Key"}}}
	if rev, err = c.UpdateProxy(ctx, p, rev); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, s.ProxyURL+"/catalog", "Idempotency-Key", "k-9"); code != 503 {
		t.Errorf("the first request: %d, want the loss", code)
	}
	if code, _ := get(t, s.ProxyURL+"/catalog", "Idempotency-Key", "k-9"); code != 200 {
		t.Errorf("the retry: %d, want 200", code)
	}
	counters, err := c.Counters(ctx, "shop", "")
	if err != nil || len(counters) != 1 || counters[0].Fault != "loss" || counters[0].Key != "k-9" || counters[0].Count != 2 || counters[0].FirstSeen.IsZero() {
		t.Fatalf("Counters: %+v %v", counters, err)
	}
	if err := c.ResetCounters(ctx, "shop", ""); err != nil {
		t.Fatal(err)
	}
	if counters, err := c.Counters(ctx, "shop", ""); err != nil || len(counters) != 0 {
		t.Errorf("after reset: %+v %v", counters, err)
	}
	if _, err := c.Counters(ctx, "shop", "no-such-session"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown session's counters: %v, want ErrNotFound", err)
	}

	preview, err := c.Record(ctx, "shop", client.Recording{Match: "^/catalog$"})
	if err != nil || len(preview.Mocks) != 1 || preview.Mocks[0].Request.URL != "^/catalog$" || preview.Mocks[0].Response.Status != 200 {
		t.Fatalf("Record: %+v %v", preview, err)
	}
	if _, _, err := c.RecordAndApply(ctx, "shop", "", client.Recording{}); !errors.Is(err, client.ErrRevisionRequired) {
		t.Errorf("apply without a revision: %v", err)
	}
	recorded, next, err := c.RecordAndApply(ctx, "shop", rev, client.Recording{Match: "^/catalog$"})
	if err != nil || next == rev || len(recorded.Mocks) != 2 {
		t.Fatalf("RecordAndApply: %d mocks, %q, %v", len(recorded.Mocks), next, err)
	}
	same, again, err := c.RecordAndApply(ctx, "shop", next, client.Recording{Match: "^/never$"})
	if err != nil || again != next || len(same.Mocks) != 2 {
		t.Errorf("nothing to record: %d mocks, %q (was %q), %v", len(same.Mocks), again, next, err)
	}
}

func TestSessions(t *testing.T) {
	s, _ := shop(t)
	c, ctx := s.Client, ctxFor(t)
	overlay := map[string]client.SessionProxy{"shop": {Mocks: []client.Mock{{Name: "mine",
		Request: client.MockRequest{Method: "GET", URL: "^/catalog$"}, Response: client.MockResponse{Status: 418, Body: "session"}}}}}
	info, err := c.CreateSession(ctx, client.Session{TTL: 60, Proxies: overlay})
	if err != nil || len(info.ID) != 22 || info.TTL != 60 || !slices.Equal(info.Proxies, []string{"shop"}) || time.Until(info.ExpiresAt) < 50*time.Second {
		t.Fatalf("CreateSession: %+v %v", info, err)
	}
	if code, body := get(t, s.ProxyURL+"/catalog", s.SessionHeader, info.ID); code != 418 || body != "session" {
		t.Errorf("in the session: %d %q", code, body)
	}
	if code, _ := get(t, s.ProxyURL+"/catalog"); code != 200 {
		t.Errorf("outside it: %d", code)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Errorf("Sessions: %+v %v", list, err)
	}
	detail, err := c.Session(ctx, info.ID)
	if err != nil || detail.Revision != info.Revision || detail.Proxies["shop"].Mocks[0].Name != "mine" {
		t.Errorf("Session: %+v %v", detail, err)
	}
	overlay["shop"] = client.SessionProxy{Loss: &client.Loss{Percentage: 1, Status: 500}}
	next, err := c.UpdateSession(ctx, info.ID, client.Session{Proxies: overlay}, info.Revision)
	if err != nil || next.Revision == info.Revision {
		t.Fatalf("UpdateSession: %+v %v", next, err)
	}
	if _, err := c.UpdateSession(ctx, info.ID, client.Session{Proxies: overlay}, info.Revision); !errors.Is(err, client.ErrRevisionMismatch) {
		t.Errorf("a stale session revision: %v", err)
	}
	if _, err := c.CreateSession(ctx, client.Session{Proxies: map[string]client.SessionProxy{"nobody": {}}}); !errors.Is(err, client.ErrConfigInvalid) {
		t.Errorf("a session over no proxy: %v", err)
	}
	if err := c.DeleteSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(ctx, info.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an ended session: %v, want ErrNotFound", err)
	}
}
