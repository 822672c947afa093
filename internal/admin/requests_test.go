package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/telemetry"
)

func (e *env) record(id, proxy, path string) {
	e.jr.Active().Record(&telemetry.Exchange{RequestID: id, Proxy: proxy, Method: "GET", Path: path, Status: 200}, time.Now())
}

func listed(a answer) string {
	var out []string
	reqs, _ := a.body["requests"].([]any)
	for _, r := range reqs {
		out = append(out, r.(map[string]any)["id"].(string))
	}
	return strings.Join(out, ",")
}

// TestRequestsShowOnlyReadableProxies: entries are shown to a caller who
// may read their proxy (alpha is admin-only); a caller who may read none
// is refused.
func TestRequestsShowOnlyReadableProxies(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	e.record("z1", "zeta", "/a")
	e.record("a1", "alpha", "/b")
	e.record("z2", "zeta", "/c")
	if got := listed(e.call(t, "GET", "/api/v1/requests", adminToken, "")); got != "z1,a1,z2" {
		t.Errorf("admin sees %s", got)
	}
	if got := listed(e.call(t, "GET", "/api/v1/requests", userToken, "")); got != "z1,z2" {
		t.Errorf("reader sees %s, want zeta's only", got)
	}
	expectCode(t, e.call(t, "GET", "/api/v1/requests", "", ""), 401, "UNAUTHORIZED")
	noRead := strings.Replace(baseDoc, "    read: [admin, user]\n", "    read: [admin]\n", 1)
	noRead = strings.Replace(noRead, "    access: {read: [admin]}\n", "", 1)
	e2 := newEnv(t, noRead, nil)
	expectCode(t, e2.call(t, "GET", "/api/v1/requests", userToken, ""), 403, "FORBIDDEN")
	expectCode(t, e2.call(t, "POST", "/api/v1/requests/verify", userToken, `{}`), 403, "FORBIDDEN")
	// since cannot name an entry the caller may not read.
	expectCode(t, e.call(t, "GET", "/api/v1/requests?since=a1", userToken, ""), 400, "CONFIG_INVALID")
}

func TestRequestFiltersAreChecked(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	e.record("z1", "zeta", "/orders")
	for _, q := range []string{"path=(", "limit=0", "limit=10001", "since=nobody", "colour=red"} {
		a := e.call(t, "GET", "/api/v1/requests?"+q, adminToken, "")
		expectCode(t, a, 400, "CONFIG_INVALID")
		if param, _, _ := strings.Cut(q, "="); !strings.HasPrefix(a.body["message"].(string), param+":") {
			t.Errorf("%s: the message does not name the parameter: %s", q, a.body["message"])
		}
	}
	if got := listed(e.call(t, "GET", "/api/v1/requests?path=^/ord&limit=1", adminToken, "")); got != "z1" {
		t.Errorf("filtered: %s", got)
	}
}

func TestVerifyAnswers(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	e.record("z1", "zeta", "/pay")
	e.record("z2", "zeta", "/pay")
	a := e.call(t, "POST", "/api/v1/requests/verify", adminToken, `{"match": {"path": "^/pay$"}, "count": {"max": 2}}`)
	if a.status != 200 || a.body["matched"] != float64(2) {
		t.Fatalf("verify: %d %s", a.status, a.raw)
	}
	a = e.call(t, "POST", "/api/v1/requests/verify", adminToken, `{"match": {"path": "^/pay$"}, "count": {"max": 1}}`)
	expectCode(t, a, 409, "VERIFICATION_FAILED")
	if !strings.HasPrefix(a.body["message"].(string), "count:") || a.body["matched"] != float64(2) || len(a.body["requests"].([]any)) != 2 {
		t.Errorf("a failed verification: %s", a.raw)
	}
	a = e.call(t, "POST", "/api/v1/requests/verify", adminToken, `{"match": {}, "nope": 1}`)
	expectCode(t, a, 400, "CONFIG_INVALID")
	if !strings.Contains(a.body["message"].(string), "nope") {
		t.Errorf("the unknown key is not named: %s", a.raw)
	}
	expectCode(t, e.call(t, "POST", "/api/v1/requests/verify", adminToken, `{"same_header": "`+strings.Repeat("x", 70<<10)+`"}`), 413, "UPLOAD_TOO_LARGE")
}

func TestClearNeedsUpdate(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	e.record("z1", "zeta", "/a")
	e.record("a1", "alpha", "/b")
	expectCode(t, e.call(t, "DELETE", "/api/v1/requests?proxy=zeta", userToken, ""), 403, "FORBIDDEN")
	if a := e.call(t, "DELETE", "/api/v1/requests?proxy=zeta", adminToken, ""); a.status != 204 {
		t.Fatalf("clear: %d %s", a.status, a.raw)
	}
	if got := listed(e.call(t, "GET", "/api/v1/requests", adminToken, "")); got != "a1" {
		t.Errorf("after clearing zeta: %s", got)
	}
}

// streamed reads a stream's events until it has n request ids, giving
// them in order, after recording one entry "live" once the stream is
// open; header is sent with the request (Last-Event-ID).
func (e *env) streamed(t *testing.T, query string, n int, header ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+"/api/v1/requests/stream"+query, nil)
	req.Header.Set("X-Proxy-Authorization", "Bearer "+adminToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		raw, _ := io.ReadAll(res.Body)
		t.Fatalf("stream %s: %d %s", query, res.StatusCode, raw)
	}
	var ids []string
	sc := bufio.NewScanner(res.Body)
	for len(ids) < n && sc.Scan() {
		if strings.HasPrefix(sc.Text(), ": ") {
			// The opening comment: the kept entries are read, what is
			// recorded now comes live.
			go e.record("live", "zeta", "/a")
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e struct{ ID string }
			_ = json.Unmarshal([]byte(data), &e)
			ids = append(ids, e.ID)
		}
	}
	if sc.Err() != nil {
		t.Logf("stream %s: %v", query, sc.Err())
	}
	return strings.Join(ids, ",")
}

// TestTheStreamReplaysThenFollows: with since or limit the stream begins
// with the kept entries they select, then the new ones, none twice; a
// reconnecting EventSource resumes after its Last-Event-ID.
func TestTheStreamReplaysThenFollows(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	for _, id := range []string{"z1", "z2", "z3"} {
		e.record(id, "zeta", "/a")
	}
	if got := e.streamed(t, "?since=z1", 3); got != "z2,z3,live" {
		t.Errorf("since=z1: %s", got)
	}
	// The newest kept (the live one above), then a new one.
	if got := e.streamed(t, "?limit=1&path=^/a", 2); got != "live,live" {
		t.Errorf("limit=1: %s", got)
	}
	// Event ids are the entries' order: z2 was the second.
	if got := e.streamed(t, "", 4, "Last-Event-ID", "2"); got != "z3,live,live,live" {
		t.Errorf("Last-Event-ID 2 (z2): %s", got)
	}
	// An id no longer kept resumes nothing: only new entries.
	if got := e.streamed(t, "", 1, "Last-Event-ID", "gone"); got != "live" {
		t.Errorf("Last-Event-ID gone: %s", got)
	}
	// since names what the list would refuse.
	expectCode(t, e.call(t, "GET", "/api/v1/requests/stream?since=nobody", adminToken, ""), 400, "CONFIG_INVALID")
}
