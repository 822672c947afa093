package admin

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/store/file"
)

// fuzzServer is newEnv for a fuzz target: one file store and one admin
// server shared by every input, called without a network in between.
func fuzzServer(f *testing.F) *Server { return fuzzServerWith(f, false) }

// fuzzServerWith is fuzzServer, with the request journal on when asked.
func fuzzServerWith(f *testing.F, journaled bool) *Server {
	dir := f.TempDir()
	path := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(path, []byte(baseDoc), 0o644); err != nil {
		f.Fatal(err)
	}
	st, err := file.Open(path, filepath.Join(dir, "templates"))
	if err != nil {
		f.Fatal(err)
	}
	snap, err := st.Load(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	rt, err := runtime.Compile(snap.Document)
	if err != nil {
		f.Fatal(err)
	}
	var j *journal.Journal
	if journaled {
		j = journal.New(snap.Document)
	}
	return New(change.New(runtime.NewHolder(rt), st, nil), nil, nil, j)
}

// checkAnswer asserts what every answer to a body must be: under 500, and
// either a success carrying a revisioned proxy or the error envelope.
func checkAnswer(t *testing.T, what string, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 || rec.Code < 200 || (rec.Code >= 300 && rec.Code < 400) {
		t.Fatalf("%s answered %d to %q: %s", what, rec.Code, body, rec.Body.String())
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%s answered %d to %q with something that is not a JSON object: %s", what, rec.Code, body, rec.Body.String())
	}
	if rec.Code >= 400 {
		if code, _ := got["code"].(string); got["status"] != "error" || code == "" || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s answered %d to %q without the error envelope: %s", what, rec.Code, body, rec.Body.String())
		}
		return
	}
	if rev, _ := got["revision"].(string); rev == "" || got["proxy"] == nil {
		t.Fatalf("%s answered %d to %q without a revisioned proxy: %s", what, rec.Code, body, rec.Body.String())
	}
}

// positioned is how a refusal names where a body stops being JSON.
var positioned = regexp.MustCompile(`^the body is not valid JSON: line [1-9][0-9]*, column [1-9][0-9]*: \S`)

// checkPositioned asserts that a body which is not JSON (and neither too
// large nor too deeply nested, refused before it is parsed) is refused
// naming the line and column of its first error (SPEC §18.3).
func checkPositioned(t *testing.T, what string, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	if json.Valid(body) || len(body) > maxRecordBody || config.CheckNesting(body) != nil {
		return
	}
	var got map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &got)
	if msg, _ := got["message"].(string); rec.Code != 400 || got["code"] != "CONFIG_INVALID" || !positioned.MatchString(msg) {
		t.Fatalf("%s answered %d to %q, which is not JSON, without naming the line and column: %s", what, rec.Code, body, rec.Body.String())
	}
}

// FuzzProxyBody feeds arbitrary bytes as a proxy document: to readBody on
// its own, and as the body of a PUT through the whole admin handler, with
// or without the revision in force (so that some writes succeed and reach
// the store). Nothing may panic or answer 5xx; a refusal is the envelope.
func FuzzProxyBody(f *testing.F) {
	for _, s := range []string{
		`{"name": "zeta", "type": "http", "url": "http://127.0.0.1:9001"}`,
		`{"proxy": {"name": "zeta", "type": "http", "url": "http://127.0.0.1:9009/api"}}`,
		`{"revision": "00", "proxy": {"name": "zeta", "type": "http", "url": "http://h"}}`,
		`{"proxy": {"name": "renamed", "type": "http", "url": "http://h", "resolve": {"type": "header", "header": "X-B"}}}`,
		`{"name": "zeta", "type": "http", "url": "http://h", "mocks": [{"name": "mm", "request": {"method": "GET", "url": "^/(?P<id>x)$", "query": {"q": ".q"}, "body": {"b": ".a.b"}}, "response": {"status": 200, "json": "{\"id\": \"{{ id }}\"}", "headers": {"X-A": "{{ q | default('') }}"}}}]}`,
		`{"name": "zeta", "type": "http", "url": "http://h", "mocks": [{"name": "mm", "request": {"method": "GET", "url": "x"}, "response": {"status": 200, "body": "{{ x"}}]}`,
		`{"name": "zeta", "type": "http", "url": "http://h", "loss": {"percentage": 0.5, "status": 503}, "latency": {"percentage": 1, "min": 0, "max": 1}, "body_limit": "1Mi", "timeout": 5}`,
		`{"name": "zeta", "type": "http", "url": "http://h", "access": {"read": ["admin"]}, "headers": {"X-I": "v"}}`,
		`{"name": "alpha", "type": "http", "url": "http://h"}`,
		`{"proxy": {}, "extra": 1}`,
		`{"revision": 1, "proxy": {}}`,
		`{"proxy": null}`,
		`{"proxy": "name: zeta"}`,
		`{}`,
		`[]`,
		`null`,
		``,
		`{"name": "zeta", "type": "http", "url": "http://h", "name": "other"}`,
		`{"name": "zeta", "type": "http", "url": "http://h", "unknown": true}`,
		`{"name": "zeta", "type": "tcp", "url": "http://h"}`,
		`{"name": "zeta", "type": "http", "url": "ftp://h/../x?y#z"}`,
		"{\"name\": \"\xff\", \"type\": \"http\", \"url\": \"http://h\"}",
		`{"name": "zeta", "type": "http", "url": "http://h", "mocks": [{"name": "mm", "request": {"method": "GET", "url": "x"}, "response": {"status": 200, "template": "../x"}}]}`,
		"name: zeta\ntype: http\nurl: http://h\n",
		`{"name": "zeta", "type": "http", "url": "http://h", "latency": {"percentage": 1, "min": 1e308, "max": 1e309}}`,
		`{"name": "zeta", "type": "http", "url": "http://h", "timeout": -1, "replace": 2}`,
		"{\n  \"name\": \"zeta\"\n  \"type\": \"http\"\n}",
		"{\"proxy\": {\"name\": \"zeta\",\n",
		`{"name": "zeta"} {}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte, withRevision bool) {
		// readBody on its own: a body is either taken, with nothing
		// written, or refused with the envelope.
		rec := httptest.NewRecorder()
		b, ok := readBody(rec, httptest.NewRequest("PUT", "/api/v1/proxies/zeta", strings.NewReader(string(body))))
		if ok {
			if b.proxy == nil || rec.Body.Len() != 0 {
				t.Fatalf("readBody took %q but gave no proxy or wrote %q", body, rec.Body.String())
			}
		} else {
			checkAnswer(t, "readBody", body, rec)
			checkPositioned(t, "readBody", body, rec)
		}

		// The whole handler: PUT to the first proxy in force, with its
		// revision when asked, so that a valid body is written.
		doc := srv.ctl.Runtime().Document
		p := &doc.Proxies[0]
		req := httptest.NewRequest("PUT", "/api/v1/proxies/"+string(p.Name), strings.NewReader(string(body)))
		req.Header.Set("X-Proxy-Authorization", "Bearer "+adminToken)
		if withRevision {
			_, rev, err := proxyJSON(p)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("If-Match", `"`+string(rev)+`"`)
		}
		rec = httptest.NewRecorder()
		documented(t, srv).ServeHTTP(rec, req)
		checkAnswer(t, "PUT "+req.URL.Path, body, rec)
		checkPositioned(t, "PUT "+req.URL.Path, body, rec)
	})
}

// FuzzRecordBody feeds arbitrary bytes as a recording's body, with the
// journal on: nothing may panic or answer 5xx; an answer is a JSON object,
// a refusal the envelope.
func FuzzRecordBody(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"match": "^/x"}`, `{"match": "("}`, `{"apply": true}`, `{"apply": true, "revision": "0000000000000000"}`,
		`{"apply": true, "revision": "zz"}`, `{"session": "s-1", "since": "2026-01-01T00:00:00Z"}`, `{"since": "nope"}`,
		`{"aply": 1}`, `[]`, `null`, ``, `{"match": 1}`, "{\n \"match\": \"x\" \"apply\": true}", `{"apply": tru`, `{"match": "` + strings.Repeat("(", 200) + `"}`,
	} {
		f.Add([]byte(s))
	}
	srv := fuzzServerWith(f, true)
	f.Fuzz(func(t *testing.T, body []byte) {
		name := string(srv.ctl.Runtime().Document.Proxies[0].Name)
		req := httptest.NewRequest("POST", "/api/v1/proxies/"+name+"/record", strings.NewReader(string(body)))
		req.Header.Set("X-Proxy-Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		documented(t, srv).ServeHTTP(rec, req)
		var got map[string]any
		if rec.Code >= 500 || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 && got["status"] != "error" {
			t.Fatalf("%q: %d without the envelope: %s", body, rec.Code, rec.Body.String())
		}
		checkPositioned(t, "POST "+req.URL.Path, body, rec)
	})
}
