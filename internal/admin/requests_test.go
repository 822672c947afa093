package admin

import (
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
