package admin

import (
	"html"
	"net/http"
	"strings"
	"sync"

	"github.com/doppelproxy/doppel/internal/apierr"
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

var dashboardAssets = sync.OnceValue(func() assets { return loadAssets(web.Dashboard(), "web/dashboard") })

// dashboardRoutes are the dashboard's entries in the route table.
func (s *Server) dashboardRoutes() []route {
	if !s.dashboard {
		return nil
	}
	page := []reply{
		{status: 200, means: "the page; its files are compiled into the binary", media: []string{"text/html"}, schema: schemaText, headers: []string{"ETag"}},
		{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
	}
	return []route{
		{"GET", "/", s.dashboardPage, api{operationID: "dashboardPage",
			tag: tagDashboard, summary: "The dashboard",
			about: "Any other GET outside `/api/`, `/static/` and `/swagger-ui/` that no route above serves answers the page too, " +
				"so that a dashboard address survives a reload. Under those three prefixes an unknown path is `404 NOT_FOUND`.",
			ok: page, codes: []apierr.Code{apierr.NotFound},
		}},
		{"GET", "/static/{resource}", s.dashboardAsset, api{operationID: "dashboardAsset",
			tag: tagDashboard, summary: "A file of the dashboard",
			ok: []reply{
				{status: 200, means: "the file", media: dashboardAssets().mediaTypes("index.html"), schema: schemaText, headers: []string{"ETag"}},
				{status: 304, means: "unchanged since the `ETag` in `If-None-Match`"},
			},
			codes: []apierr.Code{apierr.NotFound},
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
// prefix. The title and the token header, all it takes from the
// configuration, are escaped.
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
	header := string(s.ctl.Runtime().Document.Admin.Auth.Header) // in force: a reload may change it
	// One pass: what is put in is never searched for placeholders, so a
	// title such as "{{root}}" stays text.
	page := []byte(strings.NewReplacer(
		"{{title}}", html.EscapeString(s.title),
		"{{header}}", html.EscapeString(header),
		"{{root}}", root,
	).Replace(string(dashboardAssets()["index.html"].body)))
	serveFixed(w, r, "text/html; charset=utf-8", page, etagOf(page))
}

func (s *Server) dashboardAsset(w http.ResponseWriter, r *http.Request) {
	dashboardHeaders(w)
	name := r.PathValue("resource")
	a, ok := dashboardAssets()[name]
	if !ok || name == "index.html" {
		apierr.Write(w, apierr.NotFound, "no such file: /static/"+name)
		return
	}
	serveFixed(w, r, a.contentType, a.body, a.etag)
}

func (s *Server) robots(w http.ResponseWriter, r *http.Request) {
	dashboardHeaders(w)
	body := []byte(robotsTxt)
	serveFixed(w, r, "text/plain; charset=utf-8", body, etagOf(body))
}
