package admin

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// pageAnswer is a GET that must be the dashboard's page.
func expectPage(t *testing.T, a answer, what string) {
	t.Helper()
	if a.status != 200 || a.header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(a.raw, "static/app.js") {
		t.Fatalf("%s: want the page, got %d %s %.200s", what, a.status, a.header.Get("Content-Type"), a.raw)
	}
}

// Every answer of the dashboard carries the headers that keep it from
// running anything but its own files, from being framed and from being
// indexed: the page, its files, robots.txt and its 404s alike.
func TestDashboardHeaders(t *testing.T) {
	e := newEnv(t, baseDoc, nil)
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/", 200}, {"/static/app.js", 200}, {"/static/app.css", 200}, {"/robots.txt", 200},
		{"/proxies/zeta", 200}, {"/static/nothing.js", 404},
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
	js := e.call(t, "GET", "/static/app.js", "", "")
	if js.header.Get("Content-Type") != "text/javascript; charset=utf-8" || js.header.Get("ETag") == "" || js.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("app.js: %v", js.header)
	}
	if a := e.call(t, "GET", "/static/app.js", "", "", "If-None-Match", js.header.Get("ETag")); a.status != 304 {
		t.Errorf("app.js revalidated: %d", a.status)
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
		if !strings.Contains(a.raw, `href="`+c.root+`static/app.css"`) || !strings.Contains(a.raw, `src="`+c.root+`static/app.js"`) {
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
		for _, p := range []string{"/", "/proxies/zeta", "/status", "/robots.txt", "/static/app.js", "/elsewhere"} {
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
	for _, p := range []string{"/", "/static/app.js", "/static/nothing.js", "/robots.txt", "/proxies/zeta", "/status", "/elsewhere"} {
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
	for _, p := range []string{"/", "/static/{resource}", "/robots.txt"} {
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
	if !strings.Contains(a.raw, `<meta name="doppel-auth-header" content="X-Proxy-Authorization">`) {
		t.Errorf("the page does not name the token header")
	}
	// Nothing inline: the CSP would block it.
	if strings.Contains(a.raw, "<style") || regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(a.raw) ||
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
	if got := strings.Count(a.raw, title); got != 2 {
		t.Errorf("the title appears %d times, want 2:\n%s", got, a.raw)
	}
	if !strings.Contains(a.raw, `href="../static/app.css"`) || !strings.Contains(a.raw, `content="X-Proxy-Authorization"`) {
		t.Errorf("the placeholders are not filled in:\n%s", a.raw)
	}
}
