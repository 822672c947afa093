package admin

import (
	"bytes"
	"encoding/json"
	"flag"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
)

var update = flag.Bool("update", false, "rewrite golden files")

var methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// fetchDocument is GET /openapi.json, decoded.
func fetchDocument(t *testing.T, e *env) map[string]any {
	t.Helper()
	a := e.call(t, "GET", "/openapi.json", "", "")
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s %.200s", a.status, a.header.Get("Content-Type"), a.raw)
	}
	return a.body
}

func operationOf(doc map[string]any, path, method string) map[string]any {
	item, _ := doc["paths"].(map[string]any)[path].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return op
}

// TestDocumentAndRoutesAgree walks the route table and the document both
// ways, then asks the server for every documented operation.
func TestDocumentAndRoutesAgree(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	doc := fetchDocument(t, e)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v", doc["openapi"])
	}
	routes := New(e.ctl, nil, nil, nil).routeTable()
	for _, rt := range routes {
		if operationOf(doc, rt.pattern, rt.method) == nil {
			t.Errorf("%s %s is served but not documented", rt.method, rt.pattern)
		}
	}
	documented := 0
	ids := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			documented++
			if !slices.ContainsFunc(routes, func(rt route) bool { return rt.pattern == path && strings.ToLower(rt.method) == method }) {
				t.Errorf("%s %s is documented but not in the route table", method, path)
			}
			id, _ := op.(map[string]any)["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("%s %s: operationId %q is missing or twice", method, path, id)
			}
			ids[id] = true
		}
	}
	if documented != len(routes) {
		t.Errorf("%d operations documented, %d routes", documented, len(routes))
	}

	// Every documented operation is served: a real request reaches its
	// handler (never the mux's 404 or 405) and answers a status the
	// document lists for it.
	sample := map[string]string{"name": "zeta", "id": "s-1", "file": "answer.json.j2", "asset": "swagger-ui.css", "resource": "app.js"}
	param := regexp.MustCompile(`\{([a-z]+)\}`)
	for path := range doc["paths"].(map[string]any) {
		concrete := param.ReplaceAllStringFunc(path, func(m string) string { return sample[m[1:len(m)-1]] })
		var allowed []string
		for _, m := range methods {
			op := operationOf(doc, path, m)
			if op == nil {
				continue
			}
			allowed = append(allowed, m)
			fresh := newEnv(t, baseDoc, nil) // a delete must not hide the next operation's target
			body := ""
			if rb, ok := op["requestBody"].(map[string]any); ok {
				content := rb["content"].(map[string]any)
				if js, ok := content["application/json"].(map[string]any); ok {
					b, _ := json.Marshal(js["example"])
					body = string(b)
				} else {
					body = "{}"
				}
			}
			a := fresh.call(t, m, concrete, adminToken, body)
			if a.status == 405 || (a.status == 404 && strings.HasPrefix(a.body["message"].(string), "no such path")) {
				t.Errorf("%s %s (documented as %s) is not served: %d %s", m, concrete, path, a.status, a.raw)
			}
			if _, ok := op["responses"].(map[string]any)[strconv.Itoa(a.status)]; !ok {
				t.Errorf("%s %s answered %d, which the document does not list", m, concrete, a.status)
			}
			if m == "POST" && path == "/api/v1/proxies" && a.status != 201 {
				t.Errorf("the documented example of a create is refused: %d %s", a.status, a.raw)
			}
		}
		if slices.Contains(allowed, "GET") {
			allowed = append(allowed, "HEAD")
		}
		a := e.call(t, "PATCH", concrete, adminToken, "")
		expectCode(t, a, 405, "METHOD_NOT_ALLOWED")
		if a.header.Get("Allow") != strings.Join(allowed, ", ") {
			t.Errorf("PATCH %s: Allow %q, documented %q", concrete, a.header.Get("Allow"), strings.Join(allowed, ", "))
		}
	}

	// Unknown paths under the API and the pages' files stay the 404
	// envelope; any other GET is the dashboard (dashboard_test.go), and
	// no other method is.
	for _, p := range []string{"/api/v1/nothing", "/api", "/swagger-ui/a/b", "/swagger-ui/nothing.js", "/static/nothing.js", "/static/a/b"} {
		expectCode(t, e.call(t, "GET", p, "", ""), 404, "NOT_FOUND")
	}
	for _, p := range []string{"/openapi.json/more", "/openapi", "/swagger-uix", "/elsewhere"} {
		expectCode(t, e.call(t, "POST", p, "", ""), 404, "NOT_FOUND")
	}
	expectCode(t, e.call(t, "POST", "/openapi.json", "", ""), 405, "METHOD_NOT_ALLOWED")
}

// TestDocumentedActionsAreEnforced holds each route's documented action
// to what its handler asks: a token granted only that action may call it,
// and no other route that needs an action.
func TestDocumentedActionsAreEnforced(t *testing.T) {
	sample := map[string]string{"name": "nowhere", "id": "s-1", "file": "answer.json.j2", "asset": "swagger-ui.css", "resource": "app.js"}
	param := regexp.MustCompile(`\{([a-z]+)\}`)
	for _, act := range actions {
		doc := strings.Replace(baseDoc, "    list: [admin, user]\n    read: [admin, user]\n", "    "+string(act)+": [user]\n", 1)
		e := newEnv(t, doc, nil)
		for _, rt := range New(e.ctl, nil, nil, nil).routeTable() {
			path := param.ReplaceAllStringFunc(rt.pattern, func(m string) string { return sample[m[1:len(m)-1]] })
			if rt.api.action == "" {
				if a := e.call(t, rt.method, path, "", ""); a.status == 401 || a.status == 403 {
					t.Errorf("%s %s is documented as open to anyone: %d", rt.method, rt.pattern, a.status)
				}
				continue
			}
			a := e.call(t, rt.method, path, userToken, "")
			denied := a.status == 401 || a.status == 403
			if rt.api.action == act && denied {
				t.Errorf("%s %s is documented as needing %s, which the token has: %d %s", rt.method, rt.pattern, act, a.status, a.raw)
			}
			if rt.api.action != act && !denied {
				t.Errorf("%s %s is documented as needing %s, but a token with %s alone gets %d", rt.method, rt.pattern, rt.api.action, act, a.status)
			}
		}
	}
}

func TestDocumentContents(t *testing.T) {
	e := newEnv(t, strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n  auth: {header: X-Admin-Token}\n", 1), nil)
	doc := fetchDocument(t, e)
	components := doc["components"].(map[string]any)
	scheme := components["securitySchemes"].(map[string]any)["token"].(map[string]any)
	if scheme["type"] != "apiKey" || scheme["in"] != "header" || scheme["name"] != "X-Admin-Token" {
		t.Errorf("the security scheme follows admin.auth.header: %v", scheme)
	}
	schemas := components["schemas"].(map[string]any)
	// The error envelope's codes are apierr's, all of them.
	enum := schemas["ErrorBody"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	if len(enum) != len(apierr.Codes()) {
		t.Errorf("the envelope lists %d codes, apierr %d", len(enum), len(apierr.Codes()))
	}
	// The proxy is the configuration's own schema, not a copy kept by hand.
	var cfg struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(config.Schema(), &cfg); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(cfg.Defs["ProxyConfig"])
	got, _ := json.Marshal(schemas["ProxyConfig"])
	if string(got) != strings.ReplaceAll(string(want), "#/$defs/", "#/components/schemas/") {
		t.Errorf("Proxy differs from the configuration's:\n%s\n%s", got, want)
	}
	if _, ok := schemas["ServerConfig"]; ok {
		t.Error("schemas the API never shows are kept")
	}
	// Every reference resolves; nothing points outside the document, so
	// the browser UI never fetches anything.
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				if !strings.HasPrefix(r, "#/") {
					t.Errorf("an external reference: %s", r)
				} else {
					_ = resolveRef(doc, r)
				}
			}
			for _, sub := range x {
				walk(sub)
			}
		case []any:
			for _, sub := range x {
				walk(sub)
			}
		}
	}
	walk(doc)
	// An operation that needs an action says so, and can answer 401 and 403.
	op := operationOf(doc, "/api/v1/proxies/{name}", "PUT")
	if op["x-doppel-action"] != "update" || op["security"] == nil {
		t.Errorf("PUT /api/v1/proxies/{name}: %v %v", op["x-doppel-action"], op["security"])
	}
	for _, status := range []string{"200", "400", "401", "403", "404", "409", "428"} {
		if op["responses"].(map[string]any)[status] == nil {
			t.Errorf("PUT /api/v1/proxies/{name} does not document %s", status)
		}
	}
	if op := operationOf(doc, "/api/v1/status", "GET"); op["security"] != nil {
		t.Errorf("the status is open to anyone: %v", op["security"])
	}
}

// publishedOperationIDs are the operationIds the document has published:
// clients generated from it name their methods by them, so one is never
// renamed. A new route adds its own here.
var publishedOperationIDs = map[string]string{
	"GET /api/v1/proxies":                            "listProxies",
	"POST /api/v1/proxies":                           "createProxy",
	"GET /api/v1/proxies/{name}":                     "readProxy",
	"POST /api/v1/proxies/{name}/record":             "recordProxy",
	"PUT /api/v1/proxies/{name}":                     "updateProxy",
	"DELETE /api/v1/proxies/{name}":                  "deleteProxy",
	"GET /api/v1/replicas":                           "listReplicas",
	"GET /api/v1/sessions":                           "listSessions",
	"POST /api/v1/sessions":                          "createSession",
	"GET /api/v1/sessions/{id}":                      "readSession",
	"PUT /api/v1/sessions/{id}":                      "updateSession",
	"DELETE /api/v1/sessions/{id}":                   "deleteSession",
	"GET /api/v1/proxies/{name}/counters":            "listCounters",
	"DELETE /api/v1/proxies/{name}/counters":         "resetCounters",
	"GET /api/v1/proxies/{name}/templates":           "listTemplates",
	"POST /api/v1/proxies/{name}/templates/{file}":   "uploadTemplatePost",
	"PUT /api/v1/proxies/{name}/templates/{file}":    "uploadTemplatePut",
	"DELETE /api/v1/proxies/{name}/templates/{file}": "deleteTemplate",
	"POST /api/v1/config/reload":                     "reload",
	"GET /api/v1/access":                             "access",
	"GET /api/v1/schema":                             "schema",
	"GET /api/v1/status":                             "status",
	"GET /api/v1/requests":                           "listRequests",
	"DELETE /api/v1/requests":                        "clearRequests",
	"GET /api/v1/requests/stream":                    "streamRequests",
	"POST /api/v1/requests/verify":                   "verifyRequests",
	"GET /metrics":                                   "metrics",
	"GET /openapi.json":                              "openAPI",
	"GET /swagger-ui/":                               "swaggerUI",
	"GET /swagger-ui/{asset}":                        "swaggerAsset",
	"GET /":                                          "dashboardPage",
	"GET /static/assets/{resource}":                  "dashboardAsset",
	"GET /favicon.ico":                               "favicon",
	"GET /static/favicon.ico":                        "staticFavicon",
	"GET /robots.txt":                                "robots",
}

// TestOperationIDs: every route of the table (the dashboard's included)
// carries its operationId, camelCase and unique, and keeps the one it was
// published with.
func TestOperationIDs(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	routes := New(e.ctl, nil, nil, nil).routeTable()
	if !slices.ContainsFunc(routes, func(rt route) bool { return rt.pattern == "/robots.txt" }) {
		t.Fatal("the table has no dashboard routes; this test needs them")
	}
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	byID := map[string]string{}
	for _, rt := range routes {
		key, id := rt.method+" "+rt.pattern, rt.api.operationID
		switch {
		case id == "":
			t.Errorf("%s has no operationId", key)
			continue
		case !camel.MatchString(id):
			t.Errorf("%s: operationId %q is not camelCase", key, id)
		}
		if other, dup := byID[id]; dup {
			t.Errorf("operationId %q is both %s and %s", id, other, key)
		}
		byID[id] = key
		if want, ok := publishedOperationIDs[key]; !ok {
			t.Errorf("%s (%s) is not in publishedOperationIDs", key, id)
		} else if id != want {
			t.Errorf("%s: operationId %q, published as %q", key, id, want)
		}
	}
	if len(byID) != len(publishedOperationIDs) {
		t.Errorf("%d distinct operationIds in the table, %d published: a published operation is gone or lost its id", len(byID), len(publishedOperationIDs))
	}
}

func TestDocumentGolden(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	doc := openAPIDocument(New(e.ctl, nil, nil, nil).routeTable(), "X-Proxy-Authorization")
	doc["info"].(map[string]any)["version"] = "(version)"
	got, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "openapi.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/admin -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale or the document changed; run go test ./internal/admin -update and review the diff", path)
	}
}

func TestOpenAPICaching(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	first := e.call(t, "GET", "/openapi.json", "", "")
	tag := first.header.Get("ETag")
	if tag == "" || first.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers: %v", first.header)
	}
	if a := e.call(t, "GET", "/openapi.json", "", "", "If-None-Match", tag); a.status != 304 || a.raw != "" {
		t.Fatalf("revalidation: %d %q", a.status, a.raw)
	}
	// A reload that changes the token header changes the document.
	src, _ := os.ReadFile(e.path)
	_ = os.WriteFile(e.path, []byte(strings.Replace(string(src), "  port: 8081\n", "  port: 8081\n  auth: {header: X-Other}\n", 1)), 0o644)
	if a := e.call(t, "POST", "/api/v1/config/reload", adminToken, ""); a.status != 200 {
		t.Fatalf("reload: %d %s", a.status, a.raw)
	}
	a := e.call(t, "GET", "/openapi.json", "", "", "If-None-Match", tag)
	if a.status != 200 || a.header.Get("ETag") == tag || !strings.Contains(a.raw, `"X-Other"`) {
		t.Fatalf("after a reload: %d %s", a.status, a.header.Get("ETag"))
	}
}

func TestSwaggerUI(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(e.URL + "/swagger-ui")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 301 || res.Header.Get("Location") != "swagger-ui/" {
		t.Fatalf("/swagger-ui: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	page := e.call(t, "GET", "/swagger-ui/", "", "")
	if page.status != 200 || page.header.Get("Content-Type") != "text/html; charset=utf-8" || page.header.Get("ETag") == "" {
		t.Fatalf("the page: %d %v", page.status, page.header)
	}
	// Everything the page loads is served, with its content type, from
	// the binary; nothing is inline, nothing is fetched from elsewhere.
	if strings.Contains(page.raw, "<style") || regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(page.raw) ||
		regexp.MustCompile(`\s(?:style|on[a-z]+)=`).MatchString(page.raw) {
		t.Errorf("the page has inline script or style:\n%s", page.raw)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page.raw, -1)
	if len(refs) < 5 {
		t.Fatalf("the page loads %d files", len(refs))
	}
	wantType := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".png": "image/png", ".json": "application/json"}
	for _, m := range refs {
		if strings.Contains(m[1], ":") || strings.HasPrefix(m[1], "/") {
			t.Errorf("the page names %s: not relative", m[1])
			continue
		}
		a := e.call(t, "GET", "/swagger-ui/"+m[1], "", "")
		if a.status != 200 || a.header.Get("Content-Type") != wantType[filepath.Ext(m[1])] || a.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %q", m[1], a.status, a.header.Get("Content-Type"))
		}
	}
	init := e.call(t, "GET", "/swagger-ui/swagger-initializer.js", "", "")
	if !strings.Contains(init.raw, `"../openapi.json"`) || strings.Contains(init.raw, "://") {
		t.Errorf("the initializer does not load ../openapi.json alone:\n%s", init.raw)
	}
	for _, f := range []string{"LICENSE", "NOTICE"} {
		if a := e.call(t, "GET", "/swagger-ui/"+f, "", ""); a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %d %s", f, a.status, a.header.Get("Content-Type"))
		}
	}
	bundle := e.call(t, "GET", "/swagger-ui/swagger-ui-bundle.js", "", "")
	tag := bundle.header.Get("ETag")
	if len(bundle.raw) < 1<<20 || tag == "" || bundle.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("the bundle: %d bytes, ETag %q, Cache-Control %q", len(bundle.raw), tag, bundle.header.Get("Cache-Control"))
	}
	for _, inm := range []string{tag, strings.TrimPrefix(tag, "W/"), `"other", ` + tag, "*"} {
		if a := e.call(t, "GET", "/swagger-ui/swagger-ui-bundle.js", "", "", "If-None-Match", inm); a.status != 304 || a.raw != "" {
			t.Errorf("If-None-Match %s: %d", inm, a.status)
		}
	}
	if a := e.call(t, "GET", "/swagger-ui/swagger-ui-bundle.js", "", "", "If-None-Match", `"other"`); a.status != 200 {
		t.Errorf("a stale tag: %d", a.status)
	}
	head := e.call(t, "HEAD", "/swagger-ui/swagger-ui.css", "", "")
	if head.status != 200 || head.raw != "" || head.header.Get("Content-Length") == "" {
		t.Errorf("HEAD: %d %q %v", head.status, head.raw, head.header)
	}
}

// documented wraps the admin API so that every answer a test sees is held
// to the document: its status is one the operation lists, and its body
// fits the schema listed for that status and content type. The existing
// tests then check the document as a side effect.
func documented(t *testing.T, s *Server) http.Handler {
	header := string(s.ctl.Runtime().Document.Admin.Auth.Header)
	raw, _ := json.Marshal(openAPIDocument(s.routeTable(), header))
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	byPattern := map[string]route{}
	for _, rt := range s.routeTable() {
		p := rt.method + " " + routed(rt.pattern)
		mux.Handle(p, matched{})
		byPattern[p] = rt
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		s.ServeHTTP(rec, r)
		if r.Method == "HEAD" {
			return
		}
		trimmed := r.Clone(r.Context())
		trimmed.URL.Path = strings.TrimRight(r.URL.Path, "/")
		if trimmed.URL.Path == "" {
			trimmed.URL.Path = "/"
		}
		trimmed.URL.RawPath = ""
		h, pattern := mux.Handler(trimmed)
		rt, ok := byPattern[pattern]
		if _, served := h.(matched); !ok || !served {
			return // the mux's own 404, 405 and redirects to a clean path
		}
		where := rt.method + " " + rt.pattern
		op := operationOf(doc, rt.pattern, rt.method)
		resp, ok := op["responses"].(map[string]any)[strconv.Itoa(rec.status)].(map[string]any)
		if !ok {
			t.Errorf("%s answered %d, which the document does not list: %.300s", where, rec.status, rec.body.String())
			return
		}
		content, _ := resp["content"].(map[string]any)
		if rec.body.Len() == 0 {
			if content != nil && rec.status != 304 {
				t.Errorf("%s answered %d with no body; the document promises one", where, rec.status)
			}
			return
		}
		mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		media, ok := content[mt].(map[string]any)
		if !ok {
			t.Errorf("%s answered %d as %s, which the document does not list", where, rec.status, mt)
			return
		}
		if mt != "application/json" {
			return
		}
		var body any
		if err := json.Unmarshal(rec.body.Bytes(), &body); err != nil {
			t.Errorf("%s answered %d with JSON that does not parse: %v", where, rec.status, err)
			return
		}
		if errs := validate(doc, media["schema"], body, "body"); len(errs) > 0 {
			t.Errorf("%s answered %d off its documented schema:\n%s\n%.500s", where, rec.status, strings.Join(errs, "\n"), rec.body.String())
		}
	})
}

// matched marks a route in the mux documented uses to find it.
type matched struct{}

func (matched) ServeHTTP(http.ResponseWriter, *http.Request) {}

type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets a stream flush through the recorder.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
