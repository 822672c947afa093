package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// pageAnswer is a GET that must be the dashboard's page.
func expectPage(t *testing.T, a answer, what string) {
	t.Helper()
	if a.status != 200 || a.header.Get("Content-Type") != "text/html; charset=utf-8" || !hashedName.MatchString(a.raw) ||
		a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%s: want the page, got %d %s %s %.200s", what, a.status, a.header.Get("Content-Type"), a.header.Get("Cache-Control"), a.raw)
	}
}

// hashedName is how the page names its files: static/assets/<name>-<hash>.<ext>.
var hashedName = regexp.MustCompile(`static/assets/([a-z-]+)-[0-9a-f]{10}\.(js|css)`)

// pageAsset is the address (from the root) the page gives the file it
// names by source name, such as app.js.
func pageAsset(t *testing.T, page, name string) string {
	t.Helper()
	for _, m := range hashedName.FindAllStringSubmatch(page, -1) {
		if m[1]+"."+m[2] == name {
			return "/" + m[0]
		}
	}
	t.Fatalf("the page names no %s:\n%s", name, page)
	return ""
}

// pageConfigOf is the doppel-config element's JSON, decoded.
func pageConfigOf(t *testing.T, page string) map[string]any {
	t.Helper()
	const open = `<script id="doppel-config" type="application/json">`
	_, rest, ok := strings.Cut(page, open)
	if !ok {
		t.Fatalf("the page has no doppel-config element:\n%s", page)
	}
	body, _, ok := strings.Cut(rest, "</script>")
	if !ok {
		t.Fatalf("the doppel-config element is not closed")
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("doppel-config: %v: %s", err, body)
	}
	return out
}

// Every answer of the dashboard carries the headers that keep it from
// running anything but its own files, from being framed and from being
// indexed: the page, its files, robots.txt and its 404s alike.
func TestDashboardHeaders(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	page := e.call(t, "GET", "/", "", "").raw
	appJS, appCSS := pageAsset(t, page, "app.js"), pageAsset(t, page, "app.css")
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/", 200}, {appJS, 200}, {appCSS, 200}, {"/robots.txt", 200}, {"/favicon.ico", 200},
		{"/proxies/zeta", 200}, {"/static/nothing.js", 404}, {"/static/app.js", 404}, {"/static/assets/app-0000000000.js", 404},
	} {
		a := e.call(t, "GET", c.path, "", "")
		if a.status != c.status {
			t.Errorf("%s: %d, want %d", c.path, a.status, c.status)
		}
		csp := a.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: the CSP lacks %s: %q", c.path, want, csp)
			}
		}
		if strings.Contains(csp, "unsafe") || strings.Contains(csp, "*") || strings.Contains(csp, "http") {
			t.Errorf("%s: the CSP is not strict: %q", c.path, csp)
		}
		if got := a.header.Get("X-Robots-Tag"); got != "noindex, nofollow, noarchive" {
			t.Errorf("%s: X-Robots-Tag %q", c.path, got)
		}
		if a.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: X-Frame-Options %q", c.path, a.header.Get("X-Frame-Options"))
		}
	}
	robots := e.call(t, "GET", "/robots.txt", "", "")
	if robots.raw != "User-agent: *\nDisallow: /\n" || !strings.HasPrefix(robots.header.Get("Content-Type"), "text/plain") {
		t.Errorf("robots.txt: %q %s", robots.raw, robots.header.Get("Content-Type"))
	}
	js := e.call(t, "GET", appJS, "", "")
	if js.header.Get("Content-Type") != "text/javascript; charset=utf-8" || js.header.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		js.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("app.js: %v", js.header)
	}
	for _, p := range []string{"/favicon.ico", "/static/favicon.ico"} {
		ico := e.call(t, "GET", p, "", "")
		if ico.status != 200 || ico.header.Get("Content-Type") != "image/x-icon" || !strings.HasPrefix(ico.raw, "\x00\x00\x01\x00") {
			t.Errorf("%s: %d %v %q", p, ico.status, ico.header, ico.raw[:min(len(ico.raw), 8)])
		}
	}
}

// Every module is served under a name its content decides, and a module
// imports its siblings by theirs: every import of every module the page
// loads resolves, immutable, and none names an unhashed file.
func TestDashboardAssetsAreContentHashed(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	page := e.call(t, "GET", "/", "", "").raw
	seen := map[string]bool{}
	queue := []string{pageAsset(t, page, "app.js")}
	imports := regexp.MustCompile(`(?:\bfrom\s*|\bimport\s*\(\s*)['"]\./([^'"]+)['"]`)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		a := e.call(t, "GET", p, "", "")
		if a.status != 200 || a.header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Fatalf("%s: %d %v", p, a.status, a.header)
		}
		sum := sha256.Sum256([]byte(a.raw))
		if !strings.Contains(p, "-"+hex.EncodeToString(sum[:5])+".") {
			t.Errorf("%s is not named by its content", p)
		}
		for _, m := range imports.FindAllStringSubmatch(a.raw, -1) {
			if !hashedName.MatchString("static/assets/" + m[1]) {
				t.Errorf("%s imports %s, not a hashed name", p, m[1])
			}
			queue = append(queue, "/static/assets/"+m[1])
		}
	}
	if len(seen) < 8 {
		t.Errorf("the page's modules lead to %d files", len(seen))
	}
}

// A client route reloaded in the browser is the page, with its files
// named relative to where it was asked for; under the API, the files'
// directory and Swagger UI's, an unknown path is the 404 envelope, never
// the page; no other method is ever answered with HTML.
func TestDashboardRouting(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	for _, c := range []struct{ path, root string }{
		{"/", "./"}, {"/status", "./"}, {"/new", "./"}, {"/proxies/zeta", "../"}, {"/proxies/zeta/", "../../"},
		{"/somewhere/else/deep", "../../"}, {"/status?x=/a/b", "./"},
	} {
		a := e.call(t, "GET", c.path, "", "")
		expectPage(t, a, c.path)
		if !strings.Contains(a.raw, `href="`+c.root+pageAsset(t, a.raw, "app.css")[1:]+`"`) || !strings.Contains(a.raw, `src="`+c.root+pageAsset(t, a.raw, "app.js")[1:]+`"`) {
			t.Errorf("%s: the page's files are not named from %s", c.path, c.root)
		}
	}
	if a := e.call(t, "HEAD", "/proxies/zeta", "", ""); a.status != 200 || a.raw != "" {
		t.Errorf("HEAD of a client route: %d %q", a.status, a.raw)
	}
	for _, p := range []string{"/static/nothing.js", "/static/index.html", "/static", "/static/a/b", "/api", "/api/v1/nothing", "/api/v2/proxies", "/swagger-ui/nothing.js", "/swagger-ui/a/b"} {
		expectCode(t, e.call(t, "GET", p, "", ""), 404, "NOT_FOUND")
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, p := range []string{"/", "/proxies/zeta", "/status", "/robots.txt", "/static/assets/app.js", "/elsewhere"} {
			a := e.call(t, m, p, "", "")
			if a.status < 400 || strings.Contains(a.header.Get("Content-Type"), "html") || a.body["status"] != "error" {
				t.Errorf("%s %s: %d %s %.100s", m, p, a.status, a.header.Get("Content-Type"), a.raw)
			}
		}
	}
	a := e.call(t, "POST", "/", "", "")
	expectCode(t, a, 405, "METHOD_NOT_ALLOWED")
	if a.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: Allow %q", a.header.Get("Allow"))
	}
}

// admin.dashboard: false unroutes all of it: the page, its files,
// robots.txt and every client route are the 404 envelope, and the
// document no longer lists them.
func TestDashboardOff(t *testing.T) {
	e := newEnv(t, strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n  dashboard: false\n", 1), nil)
	for _, p := range []string{"/", "/static/assets/app.js", "/favicon.ico", "/static/nothing.js", "/robots.txt", "/proxies/zeta", "/status", "/elsewhere"} {
		a := e.call(t, "GET", p, "", "")
		expectCode(t, a, 404, "NOT_FOUND")
		if a.header.Get("Content-Security-Policy") != "" {
			t.Errorf("%s: answered by the dashboard", p)
		}
	}
	expectCode(t, e.call(t, "POST", "/", "", ""), 404, "NOT_FOUND")
	if a := e.call(t, "GET", "/api/v1/status", "", ""); a.status != 200 {
		t.Errorf("the API is still served: %d", a.status)
	}
	if a := e.call(t, "GET", "/swagger-ui/", "", ""); a.status != 200 {
		t.Errorf("Swagger UI is still served: %d", a.status)
	}
	doc := fetchDocument(t, e)
	for _, p := range []string{"/", "/static/assets/{resource}", "/favicon.ico", "/robots.txt"} {
		if _, ok := doc["paths"].(map[string]any)[p]; ok {
			t.Errorf("%s is documented with the dashboard off", p)
		}
	}
	for _, tag := range doc["tags"].([]any) {
		if tag.(map[string]any)["name"] == tagDashboard {
			t.Error("the dashboard's tag is listed with the dashboard off")
		}
	}
}

// admin.title names the page, escaped wherever it appears; so is the
// token header. The title is the one at start: a reload does not change
// the listener's settings.
func TestDashboardTitleIsEscaped(t *testing.T) {
	title := `<script>alert("x")</script> & 'Ops'`
	e := newEnv(t, strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n  title: '"+strings.ReplaceAll(title, "'", "''")+"'\n", 1), nil)
	a := e.call(t, "GET", "/", "", "")
	expectPage(t, a, "/")
	if strings.Contains(a.raw, "<script>alert") || strings.Contains(a.raw, title) {
		t.Fatalf("the title is not escaped:\n%s", a.raw)
	}
	escaped := "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;Ops&#39;"
	if got := strings.Count(a.raw, escaped); got != 2 {
		t.Errorf("the escaped title appears %d times, want 2 (<title> and the heading):\n%s", got, a.raw)
	}
	if strings.Contains(a.raw, "{{") {
		t.Errorf("a placeholder is left in the page")
	}
	// The doppel-config element carries the title as written, and
	// nothing in it can close the element: the page has exactly its two
	// script elements.
	if cfg := pageConfigOf(t, a.raw); cfg["title"] != title || cfg["authHeader"] != "X-Proxy-Authorization" || cfg["public"] != false || cfg["version"] == "" {
		t.Errorf("doppel-config: %v", cfg)
	}
	if n := strings.Count(a.raw, "<script"); n != 2 {
		t.Errorf("%d script elements, want 2:\n%s", n, a.raw)
	}
	// Nothing inline but the configuration, which is data: the CSP would
	// block a script.
	withoutConfig := regexp.MustCompile(`<script id="doppel-config" type="application/json">[^<]*</script>`).ReplaceAllString(a.raw, "")
	if strings.Contains(a.raw, "<style") || regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(withoutConfig) ||
		regexp.MustCompile(`\s(?:style|on[a-z]+)=`).MatchString(a.raw) {
		t.Errorf("the page has inline script or style")
	}
	// Every file the page names is served.
	for _, m := range regexp.MustCompile(`(?:src|href)="\./([^"]+)"`).FindAllStringSubmatch(a.raw, -1) {
		if m[1] == "" || strings.HasPrefix(m[1], "swagger-ui/") || m[1] == "status" {
			continue
		}
		if f := e.call(t, "GET", "/"+m[1], "", ""); f.status != http.StatusOK {
			t.Errorf("the page names %s: %d", m[1], f.status)
		}
	}
}

// The placeholders are filled in one pass: a title that reads like one
// is shown as written, not filled in again.
func TestDashboardTitleLikePlaceholders(t *testing.T) {
	title := "{{root}} {{header}} {{title}}"
	e := newEnv(t, strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n  title: '"+title+"'\n", 1), nil)
	a := e.call(t, "GET", "/proxies/zeta", "", "")
	expectPage(t, a, "/proxies/zeta")
	if !strings.Contains(a.raw, "<title>"+title+"</title>") {
		t.Errorf("the title is not shown as written:\n%s", a.raw)
	}
	if got := strings.Count(a.raw, title); got != 3 {
		t.Errorf("the title appears %d times, want 3 (<title>, the heading, doppel-config):\n%s", got, a.raw)
	}
	if !strings.Contains(a.raw, `href="..`+pageAsset(t, a.raw, "app.css")+`"`) || pageConfigOf(t, a.raw)["authHeader"] != "X-Proxy-Authorization" {
		t.Errorf("the placeholders are not filled in:\n%s", a.raw)
	}
}
