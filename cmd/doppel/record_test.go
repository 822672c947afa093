package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recordBackend is a real backend worth recording: JSON with template
// syntax in it, text, an error, a POST, a slow path, and a cookie that
// must never be recorded.
func recordBackend(t *testing.T) *httptest.Server {
	var catalog atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.Method + " " + r.URL.Path {
		case "GET /catalog":
			n := catalog.Add(1)
			h.Set("Content-Type", "application/json; charset=utf-8")
			h.Set("X-Catalog", "v1")
			h.Set("Set-Cookie", "session=s3cr3t; HttpOnly")
			fmt.Fprintf(w, `{"version": %d, "items": [1, 2], "tmpl": "{{ x }} {%% if y %%} {# c #} {{{"}`, n)
		case "GET /text":
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "hello {{ name }}\r\n{% raw %}tail{%endraw%}\n")
		case "GET /missing":
			h.Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"title": "not here"}`)
		case "POST /orders":
			_, _ = io.Copy(io.Discard, r.Body)
			h.Set("Content-Type", "application/json")
			h.Set("Location", "/orders/7")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"id": 7}`)
		case "GET /slow":
			time.Sleep(40 * time.Millisecond)
			_, _ = io.WriteString(w, "slow")
		case "GET /logo.png":
			h.Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n\x00\xff{{ x }}\"\\ end"))
		case "GET /big":
			_, _ = io.WriteString(w, strings.Repeat("b", 200))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type recorded struct {
	status int
	header http.Header
	body   []byte
}

func send(t *testing.T, method, url, body string) recorded {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	res, err := newClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return recorded{res.StatusCode, res.Header, b}
}

func postJSON(t *testing.T, url, body string) (int, map[string]any, string) {
	t.Helper()
	res, err := newClient().Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return res.StatusCode, v, string(raw)
}

// TestRecordThenReplayWithoutTheBackend: exchanges with a real backend
// (text, JSON, binary)
// become mocks through the admin API; applied, the same requests get the
// same answers (statuses, headers, bodies byte for byte) with the backend
// gone, and no secret was recorded.
func TestRecordThenReplayWithoutTheBackend(t *testing.T) {
	t.Parallel()
	backend := recordBackend(t)
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "proxies:\n"+proxyYAML("shop", backend.URL+"/", "")+
		"  - name: tight\n    type: http\n    url: "+backend.URL+"/\n    body_limit: 64\n    resolve: {type: header, header: X-Tight}\n")
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, addr := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	admin := "http://" + adminAddrOf(t, p)
	proxyURL := "http://" + addr

	requests := []struct{ method, path, body string }{
		{"GET", "/catalog", ""}, {"GET", "/catalog", ""}, {"GET", "/text", ""}, {"GET", "/missing", ""},
		{"POST", "/orders", `{"sku": "a"}`}, {"GET", "/slow", ""}, {"GET", "/logo.png", ""},
	}
	live := map[string]recorded{}
	for _, r := range requests {
		live[r.method+" "+r.path] = send(t, r.method, proxyURL+r.path, r.body)
	}
	if got := live["GET /catalog"]; !bytes.Contains(got.body, []byte(`"version": 2`)) {
		t.Fatalf("the backend's second catalog: %s", got.body)
	}

	t.Run("a preview changes nothing", func(t *testing.T) {
		code, v, raw := postJSON(t, admin+"/api/v1/proxies/shop/record", `{}`)
		if code != 200 {
			t.Fatalf("%d %s", code, raw)
		}
		mocks, _ := v["mocks"].([]any)
		if len(mocks) != 6 || v["exchanges"] != float64(7) {
			t.Fatalf("%d mocks from %v exchanges: %s", len(mocks), v["exchanges"], raw)
		}
		if strings.Contains(raw, "s3cr3t") || strings.Contains(raw, "Set-Cookie") || strings.Contains(raw, `"Date"`) {
			t.Errorf("a secret or the date was recorded: %s", raw)
		}
		var slow map[string]any
		for _, m := range mocks {
			if m.(map[string]any)["name"] == "rec-get-slow" {
				slow = m.(map[string]any)
			}
		}
		lat, _ := slow["proxy"].(map[string]any)["latency"].(map[string]any)
		if lat == nil || lat["min"].(float64) < 0.04 || lat["max"].(float64) < lat["min"].(float64) {
			t.Errorf("the slow path's latency: %v", slow)
		}
		// Every mock has its latency, a path the backend answered within
		// a millisecond too.
		for _, m := range mocks {
			o, _ := m.(map[string]any)["proxy"].(map[string]any)
			l, _ := o["latency"].(map[string]any)
			if l == nil || l["percentage"] != 1.0 || l["min"].(float64) < 0.0001 || l["max"].(float64) < l["min"].(float64) {
				t.Errorf("%v: latency %v", m.(map[string]any)["name"], l)
			}
		}
		if r := mustGet(t, newClient(), admin+"/api/v1/proxies/shop", nil); strings.Contains(string(r.body), "rec-") {
			t.Error("a preview added mocks")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		if code, _, raw := postJSON(t, admin+"/api/v1/proxies/shop/record", `{"apply": true}`); code != 428 || !strings.Contains(raw, "REVISION_REQUIRED") {
			t.Errorf("apply without a revision: %d %s", code, raw)
		}
		if code, _, raw := postJSON(t, admin+"/api/v1/proxies/shop/record", `{"apply": true, "revision": "0000000000000000"}`); code != 409 || !strings.Contains(raw, "REVISION_MISMATCH") {
			t.Errorf("a stale revision: %d %s", code, raw)
		}
		if code, v, raw := postJSON(t, admin+"/api/v1/proxies/shop/record", `{"match": "^/nothing-here$"}`); code != 200 || len(v["mocks"].([]any)) != 0 || !strings.Contains(raw, "nothing to record") {
			t.Errorf("a match selecting nothing: %d %s", code, raw)
		}
		if code, _, raw := postJSON(t, admin+"/api/v1/proxies/shop/record", `{"match": "("}`); code != 400 || !strings.Contains(raw, "match") {
			t.Errorf("a bad match: %d %s", code, raw)
		}
		if code, _, raw := postJSON(t, admin+"/api/v1/proxies/shop/record", `{"aply": true}`); code != 400 {
			t.Errorf("an unknown key: %d %s", code, raw)
		}
		if code, _, raw := postJSON(t, admin+"/api/v1/proxies/nope/record", `{}`); code != 404 {
			t.Errorf("no such proxy: %d %s", code, raw)
		}
		req, _ := http.NewRequest("GET", proxyURL+"/big", nil)
		req.Header.Set("X-Tight", "tight")
		if res, err := newClient().Do(req); err != nil || res.StatusCode != 200 {
			t.Fatalf("GET /big: %v %v", res, err)
		}
		if code, _, raw := postJSON(t, admin+"/api/v1/proxies/tight/record", `{}`); code != 400 || !strings.Contains(raw, "body_limit") {
			t.Errorf("a body over body_limit: %d %s", code, raw)
		}
	})

	t.Run("the command line prints YAML", func(t *testing.T) {
		r := doppel(t, invocation{args: []string{"mocks", "record", "--admin", admin, "--proxy", "shop", "--match", "^/(text|missing)$"}})
		if r.code != wantOK || !strings.Contains(r.stdout, "# 2 mocks recorded, from 2 exchanges") ||
			!strings.Contains(r.stdout, "name: rec-get-text") || !strings.Contains(r.stdout, "mocks:") {
			t.Fatalf("%s", r)
		}
		// What it prints loads as a proxy's mocks.
		all := doppel(t, invocation{args: []string{"mocks", "record", "--admin", admin, "--proxy", "shop"}})
		if all.code != wantOK {
			t.Fatalf("%s", all)
		}
		doc := "proxies:\n  - name: replay\n    type: http\n    url: http://127.0.0.1:9/\n    " +
			strings.ReplaceAll(strings.TrimSpace(all.stdout[strings.Index(all.stdout, "mocks:"):]), "\n", "\n    ") + "\n"
		if r := doppel(t, invocation{args: []string{"config", "validate", "--config", serveConfig(t, t.TempDir(), 0, 0, doc)}}); r.code != wantOK {
			t.Errorf("the recorded mocks do not load: %s\n%s", r, doc)
		}
		if r := doppel(t, invocation{args: []string{"mocks", "record", "--admin", admin}}); r.code != wantUsage {
			t.Errorf("without --proxy: %s", r)
		}
	})

	t.Run("applied, the backend can go", func(t *testing.T) {
		r := doppel(t, invocation{args: []string{"mocks", "record", "--admin", admin, "--proxy", "shop", "--apply"}})
		if r.code != wantOK || !strings.Contains(r.stdout, "# 6 mocks added to proxy shop") {
			t.Fatalf("%s", r)
		}
		backend.Close()
		for _, req := range requests {
			key := req.method + " " + req.path
			want, got := live[key], send(t, req.method, proxyURL+req.path, req.body)
			if key == "GET /catalog" && got.status == want.status {
				// The latest answer wins: the second.
				if !bytes.Equal(got.body, want.body) {
					t.Errorf("%s: body %q, want %q", key, got.body, want.body)
				}
			}
			if got.status != want.status || !bytes.Equal(got.body, want.body) {
				t.Errorf("%s: %d %q, want %d %q", key, got.status, got.body, want.status, want.body)
			}
			for _, h := range []string{"Content-Type", "X-Catalog", "Location"} {
				if got.header.Get(h) != want.header.Get(h) {
					t.Errorf("%s: %s %q, want %q", key, h, got.header.Get(h), want.header.Get(h))
				}
			}
			if got.header.Get("Set-Cookie") != "" {
				t.Errorf("%s: the cookie came back", key)
			}
		}
		start := time.Now()
		if got := send(t, "GET", proxyURL+"/slow", ""); got.status != 200 || time.Since(start) < 35*time.Millisecond {
			t.Errorf("the recorded latency: %d after %v", got.status, time.Since(start))
		}
	})
}

// TestRecordingNeedsTheBodies: with journal.bodies 0 there is nothing to
// make a mock's body from, and the answer names the setting.
func TestRecordingNeedsTheBodies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := serveConfig(t, dir, 0, 0, "journal: {bodies: 0}\nproxies:\n"+proxyYAML("shop", "http://127.0.0.1:9/", ""))
	cfg = writeFile(t, dir, "main.yaml", strings.Replace(readFile(t, cfg), "admin:\n", "admin:\n  public: true\n", 1))
	p, _ := serveUp(t, cfg, nil, "--admin-addr", "127.0.0.1:0")
	code, _, raw := postJSON(t, "http://"+adminAddrOf(t, p)+"/api/v1/proxies/shop/record", `{}`)
	if code != 400 || !strings.Contains(raw, "journal.bodies") {
		t.Fatalf("%d %s", code, raw)
	}
}
