package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html"
	"io"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/version"
	"github.com/doppelproxy/doppel/web"
)

// The dashboard (SPEC §9.8) is a client of the API above: a page and its
// files, compiled into the binary, served from the root of the admin
// listener. It is routed only when admin.dashboard was true at start.

// contentSecurityPolicy lets the page run its own files and nothing else:
// no inline script or style, no other origin, no framing, no <base>.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

const robotsTxt = "User-agent: *\nDisallow: /\n"

var dashboardAssets = sync.OnceValue(func() hashedAssets { return hashAssets(web.Dashboard()) })

// immutable is how a file under its content-hashed name is cached: a
// changed file is a different address, so nothing has to expire.
const immutable = "public, max-age=31536000, immutable"

// hashedAssets are the dashboard's files under content-hashed names
// (static/assets/app-<hash>.js), with the page whose placeholders
// {{asset NAME}} already name them. Built once from the binary's files.
type hashedAssets struct {
	files   assets // by hashed name
	page    string // index.html, its assets named
	favicon asset
}

// importSpec is a module's import of a sibling module, the only form the
// dashboard's modules use: from './x.js' or import('./x.js').
var importSpec = regexp.MustCompile(`(\bfrom\s*|\bimport\s*\(\s*)(['"])\./([A-Za-z0-9_.-]+\.js)(['"])`)

// hashAssets names every file by its content. A module's imports are
// rewritten to the names of what it imports, before it is hashed itself:
// a change anywhere renames every module that leads to it, so a browser
// holding an immutable copy never mixes an old module with a new one.
func hashAssets(files fs.FS) hashedAssets {
	src := loadAssets(files, "web/dashboard")
	named := map[string]string{} // source name -> hashed name
	out := hashedAssets{files: assets{}}
	var visit func(name string, chain []string)
	visit = func(name string, chain []string) {
		if _, done := named[name]; done {
			return
		}
		for _, c := range chain {
			if c == name {
				panic("web/dashboard: an import cycle through " + name) // the binary's own files
			}
		}
		a, ok := src[name]
		if !ok {
			panic("web/dashboard: " + chain[len(chain)-1] + " imports " + name + ", which is not embedded")
		}
		body := a.body
		if path.Ext(name) == ".js" {
			for _, m := range importSpec.FindAllSubmatch(body, -1) {
				visit(string(m[3]), append(chain, name))
			}
			body = importSpec.ReplaceAllFunc(body, func(m []byte) []byte {
				p := importSpec.FindSubmatch(m)
				return []byte(string(p[1]) + string(p[2]) + "./" + named[string(p[3])] + string(p[4]))
			})
		}
		sum := sha256.Sum256(body)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "-" + hex.EncodeToString(sum[:5]) + ext
		named[name] = hashed
		out.files[hashed] = asset{body: body, contentType: a.contentType, etag: etagOf(body)}
	}
	for name := range src {
		if name != "index.html" && name != "favicon.ico" {
			visit(name, nil)
		}
	}
	out.favicon = src["favicon.ico"]
	out.page = regexp.MustCompile(`\{\{asset ([^}]+)\}\}`).ReplaceAllStringFunc(string(src["index.html"].body), func(m string) string {
		name := m[len("{{asset ") : len(m)-2]
		hashed, ok := named[name]
		if !ok {
			panic("web/dashboard/index.html names " + name + ", which is not embedded")
		}
		return "static/assets/" + hashed
	})
	return out
}

// pageConfig is what the page is told in its doppel-config element, under
// 1.1's names: the heading, the token header, whether the API asks for a
// token at all, the version.
type pageConfig struct {
	Title      string `json:"title"`
	Public     bool   `json:"public"`
	Version    string `json:"version"`
	AuthHeader string `json:"authHeader"`
}

// dashboardRoutes are the dashboard's entries in the route table.
func (s *Server) dashboardRoutes() []route {
	if !s.dashboard {
		return nil
	}
	page := []reply{
		{status: 200, means: "the page; its files are compiled into the binary", media: []string{"text/html"}, schema: schemaText},
	}
	return []route{
		{"GET", "/", s.dashboardPage, api{operationID: "dashboardPage",
			tag: tagDashboard, summary: "The dashboard",
			about: "Any other GET outside `/api/`, `/static/` and `/swagger-ui/` that no route above serves answers the page too, " +
				"so that a dashboard address survives a reload. Under those three prefixes an unknown path is `404 NOT_FOUND`. " +
				"Never cached (`no-store`): the page carries the configuration in its `doppel-config` element.",
			ok: page, codes: []apierr.Code{apierr.NotFound},
		}},
		{"GET", "/static/assets/{resource}", s.dashboardAsset, api{operationID: "dashboardAsset",
			tag: tagDashboard, summary: "A file of the dashboard, under its content-hashed name",
			about: "Named by its content, so cached for good: `Cache-Control: " + immutable + "`.",
			ok: []reply{
				{status: 200, means: "the file", media: dashboardAssets().files.mediaTypes(""), schema: schemaText},
			},
			codes: []apierr.Code{apierr.NotFound},
		}},
		{"GET", "/favicon.ico", s.favicon, api{operationID: "favicon",
			tag: tagDashboard, summary: "The dashboard's icon",
			about: "Also at `/static/favicon.ico`, where 1.1 serves it.",
			ok: []reply{
				{status: 200, means: "the icon", media: []string{"image/x-icon"}, schema: schemaText, headers: []string{"ETag"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
		}},
		{"GET", "/static/favicon.ico", s.favicon, api{operationID: "staticFavicon",
			tag: tagDashboard, summary: "The dashboard's icon",
			ok: []reply{
				{status: 200, means: "the icon", media: []string{"image/x-icon"}, schema: schemaText, headers: []string{"ETag"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
		}},
		{"GET", "/robots.txt", s.robots, api{operationID: "robots",
			tag: tagDashboard, summary: "Asks crawlers to stay away",
			ok: []reply{
				{status: 200, means: "`Disallow: /` for every agent", media: []string{"text/plain"}, schema: schemaText, headers: []string{"ETag"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
		}},
	}
}

// dashboardHeaders go on every answer of the dashboard, errors included.
func dashboardHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Robots-Tag", "noindex, nofollow, noarchive")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// outsidePage are the prefixes under which an unknown path is an error,
// not the page: the API, the page's own files and Swagger UI's.
var outsidePage = []string{"/api", "/static", "/swagger-ui"}

// dashboardPage answers the page for the root and for every client route.
// Its files are named relative to the address asked for ({{root}} is the
// way back up), so the dashboard also works under a reverse proxy's
// prefix. The title is HTML-escaped where the page shows it; the
// doppel-config element carries it as JSON with every <, > and & escaped,
// so no title can close the element.
func (s *Server) dashboardPage(w http.ResponseWriter, r *http.Request) {
	dashboardHeaders(w)
	p := r.URL.Path
	for _, prefix := range outsidePage {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			apierr.Write(w, apierr.NotFound, "no such path: "+p)
			return
		}
	}
	sent, _, _ := strings.Cut(r.RequestURI, "?")
	if !strings.HasPrefix(sent, "/") {
		sent = r.URL.EscapedPath() // an absolute-form request line
	}
	root := "./"
	if depth := strings.Count(sent[1:], "/"); depth > 0 {
		root = strings.Repeat("../", depth)
	}
	admin := s.ctl.Runtime().Document.Admin // in force: a reload may change the header and public
	config, err := json.Marshal(pageConfig{Title: s.title, Public: admin.IsPublic(), Version: version.Version, AuthHeader: string(admin.Auth.Header)})
	if err != nil {
		panic(err) // strings and a bool: cannot fail
	}
	// One pass: what is put in is never searched for placeholders, so a
	// title such as "{{root}}" stays text.
	page := strings.NewReplacer(
		"{{title}}", html.EscapeString(s.title),
		"{{config}}", string(config),
		"{{root}}", root,
	).Replace(dashboardAssets().page)
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(page)))
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, page)
	}
}

func (s *Server) dashboardAsset(w http.ResponseWriter, r *http.Request) {
	dashboardHeaders(w)
	name := r.PathValue("resource")
	a, ok := dashboardAssets().files[name]
	if !ok {
		apierr.Write(w, apierr.NotFound, "no such file: /static/assets/"+name)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", immutable)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
}

func (s *Server) favicon(w http.ResponseWriter, r *http.Request) {
	dashboardHeaders(w)
	a := dashboardAssets().favicon
	serveFixed(w, r, a.contentType, a.body, a.etag)
}

func (s *Server) robots(w http.ResponseWriter, r *http.Request) {
	dashboardHeaders(w)
	body := []byte(robotsTxt)
	serveFixed(w, r, "text/plain; charset=utf-8", body, etagOf(body))
}
