package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/store/pgtest"
	"github.com/doppelproxy/doppel/internal/store/storetest"
)

// placeFile writes dir/name, making dir: what a user or a finder leaves.
func placeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, name, content)
}

// templateMock is a mock answering GET /<file> from the template file.
func templateMock(file string) string {
	return fmt.Sprintf(`{"name": %q, "request": {"method": "GET", "url": "^/%s$"}, "response": {"status": 200, "template": %q}}`, strings.TrimSuffix(file, ".j2"), file, file)
}

// putProxy replaces proxy name with the given mocks, at the revision read.
func putProxy(t *testing.T, admin, name, url string, mocks ...string) {
	t.Helper()
	got := call(t, "GET", admin+"/api/v1/proxies/"+name, "", bearer(envToken)...)
	var read struct{ Revision string }
	if err := json.Unmarshal(got.body, &read); err != nil || read.Revision == "" {
		t.Fatalf("GET %s: %d %s", name, got.status, got.body)
	}
	body := fmt.Sprintf(`{"name": %q, "type": "http", "url": %q, "mocks": [%s]}`, name, url, strings.Join(mocks, ", "))
	if r := call(t, "PUT", admin+"/api/v1/proxies/"+name, body, append(bearer(envToken), "If-Match", read.Revision)...); r.status != 200 {
		t.Fatalf("PUT %s: %d %s", name, r.status, r.body)
	}
}

// TestTemplateDirectoryFollowsTheDocument: the file store's template
// directory is what the document says (SPEC §19.4, §19.5). A write leaves
// a proxy only the files its mocks name, whatever else lies there (a dot
// file, a name that is not UTF-8, a directory), and removes the directory
// of a proxy left with none; a proxy created over the API starts with no
// file, whatever was left under its name.
func TestTemplateDirectoryFollowsTheDocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "templates")
	const url = "http://127.0.0.1:9"
	cfg := serveConfig(t, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: `+url+`
    mocks:
      - {name: page, request: {method: GET, url: "^/page.j2$"}, response: {status: 200, template: page.j2}}
      - {name: old, request: {method: GET, url: "^/old.j2$"}, response: {status: 200, template: old.j2}}
`)
	// Left under the name of a proxy that does not exist yet, and litter
	// in shop's directory that no upload made.
	placeFile(t, filepath.Join(root, "ghost"), "stale.j2", "stale")
	placeFile(t, filepath.Join(root, "shop"), ".DS_Store", "finder")
	placeFile(t, filepath.Join(root, "shop"), "\xff\xfe.j2", "not utf-8")
	placeFile(t, filepath.Join(root, "shop", "sub"), "x", "x")

	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	proxy := "http://" + p.waitServing()
	admin := "http://" + lineField(p.waitLine("the admin listener", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")

	for _, f := range []string{"page.j2", "old.j2"} {
		if r := call(t, "PUT", admin+"/api/v1/proxies/shop/templates/"+f, f+" body", bearer(envToken)...); r.status != 204 {
			t.Fatalf("upload %s: %d %s", f, r.status, r.body)
		}
	}

	// The update drops old.j2's mock: shop keeps page.j2 alone.
	putProxy(t, admin, "shop", url, templateMock("page.j2"))
	if got := storetest.Tree(t, filepath.Join(root, "shop")); !slices.Equal(got, []string{"page.j2"}) {
		t.Fatalf("after the update shop's directory holds %q, want only page.j2", got)
	}
	if r := mustGet(t, newClient(), proxy+"/page.j2", nil); r.status != 200 || string(r.body) != "page.j2 body" {
		t.Fatalf("GET /page.j2: %d %s", r.status, r.body)
	}
	list := call(t, "GET", admin+"/api/v1/proxies/shop/templates", "", bearer(envToken)...)
	if list.status != 200 || !strings.Contains(string(list.body), "page.j2") || strings.Contains(string(list.body), "old.j2") {
		t.Fatalf("the listing: %d %s", list.status, list.body)
	}

	// Litter comes back; an update naming no file leaves no directory.
	placeFile(t, filepath.Join(root, "shop"), ".DS_Store", "finder")
	putProxy(t, admin, "shop", url)
	if _, err := os.Stat(filepath.Join(root, "shop")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("shop names no file, and its directory stayed: %v %q", err, storetest.Tree(t, filepath.Join(root, "shop")))
	}

	// A proxy created under ghost's name does not inherit stale.j2.
	create := fmt.Sprintf(`{"proxy": {"name": "ghost", "type": "http", "url": %q, "resolve": {"type": "header", "header": "X-Ghost"}, "mocks": [%s]}}`, url, templateMock("stale.j2"))
	if r := call(t, "POST", admin+"/api/v1/proxies", create, bearer(envToken)...); r.status != 201 {
		t.Fatalf("create ghost: %d %s", r.status, r.body)
	}
	if r := mustGet(t, newClient(), proxy+"/stale.j2", map[string]string{"X-Ghost": "ghost"}); r.status != 500 || !strings.Contains(string(r.body), "TEMPLATE_NOT_FOUND") {
		t.Fatalf("the new proxy served a file left under its name: %d %s", r.status, r.body)
	}
	if got := storetest.Tree(t, filepath.Join(root, "ghost")); len(got) != 0 {
		t.Fatalf("the new proxy's directory holds %q", got)
	}
}

// TestTemplateDirectoryIsWhatTheDatabaseHolds: with the PostgreSQL store,
// the start and every reload make templates.dir exactly what the database
// holds, and a write that drops templates removes every file of that
// proxy's directory that no row backs (SPEC §19.3).
func TestTemplateDirectoryIsWhatTheDatabaseHolds(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	if r := doppel(t, invocation{args: []string{"config", "migrate", "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "templates")
	const upstreamURL = "http://127.0.0.1:9"
	cfg := serveConfig(t, dir, 0, 0, `proxies:
  - name: shop
    type: http
    url: `+upstreamURL+`
    mocks:
      - {name: page, request: {method: GET, url: "^/page.j2$"}, response: {status: 200, template: page.j2}}
      - {name: old, request: {method: GET, url: "^/old.j2$"}, response: {status: 200, template: old.j2}}
`)
	if r := doppel(t, invocation{args: []string{"config", "push", "--config", cfg, "--database-url", url}}); r.code != 0 {
		t.Fatal(r)
	}
	// What an earlier process or a user left: no row backs any of it.
	placeFile(t, filepath.Join(root, "ghost"), "stale.j2", "stale")
	placeFile(t, filepath.Join(root, "shop"), "page.j2", "not in the database")
	placeFile(t, filepath.Join(root, "shop"), ".DS_Store", "finder")

	p := startProc(t, invocation{
		args: []string{"serve", "--store", "postgres", "--database-url", url, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--socket", filepath.Join(t.TempDir(), "s.sock")},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	proxy := "http://" + p.waitServing()
	admin := "http://" + lineField(p.waitLine("the admin listener", 10*time.Second, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
	if got := storetest.Tree(t, root); len(got) != 0 {
		t.Fatalf("after the start templates.dir holds %q; the database holds no file", got)
	}
	if r := mustGet(t, newClient(), proxy+"/page.j2", nil); r.status != 500 || !strings.Contains(string(r.body), "TEMPLATE_NOT_FOUND") {
		t.Fatalf("a file no row backs was served: %d %s", r.status, r.body)
	}

	for _, f := range []string{"page.j2", "old.j2"} {
		if r := call(t, "PUT", admin+"/api/v1/proxies/shop/templates/"+f, f+" body", bearer(envToken)...); r.status != 204 {
			t.Fatalf("upload %s: %d %s", f, r.status, r.body)
		}
	}
	placeFile(t, filepath.Join(root, "shop"), ".DS_Store", "finder")
	putProxy(t, admin, "shop", upstreamURL, templateMock("page.j2"))
	if got := storetest.Tree(t, root); !slices.Equal(got, []string{"shop", filepath.Join("shop", "page.j2")}) {
		t.Fatalf("after the write templates.dir holds %q, want only shop/page.j2", got)
	}
	if list := call(t, "GET", admin+"/api/v1/proxies/shop/templates", "", bearer(envToken)...); strings.Contains(string(list.body), "old.j2") {
		t.Fatalf("old.j2's row outlived its mock: %s", list.body)
	}

	placeFile(t, filepath.Join(root, "ghost"), "stale.j2", "stale")
	placeFile(t, filepath.Join(root, "shop"), ".DS_Store", "finder")
	placeFile(t, root, "loose.txt", "x")
	if r := call(t, "POST", admin+"/api/v1/config/reload", "", bearer(envToken)...); r.status != 200 {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	if got := storetest.Tree(t, root); !slices.Equal(got, []string{"shop", filepath.Join("shop", "page.j2")}) {
		t.Fatalf("after the reload templates.dir holds %q, want only shop/page.j2", got)
	}
	if r := mustGet(t, newClient(), proxy+"/page.j2", nil); r.status != 200 || string(r.body) != "page.j2 body" {
		t.Fatalf("GET /page.j2: %d %s", r.status, r.body)
	}
}
