package admin

import (
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/web"
)

// asset is one file of the Swagger UI page, read once from the binary.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// assetTypes are the content types by extension. Set here rather than
// taken from the system's MIME table, which differs between hosts.
var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".txt":  "text/plain; charset=utf-8",
	"":      "text/plain; charset=utf-8", // LICENSE, NOTICE
}

var swaggerAssets = sync.OnceValue(func() assets { return loadAssets(web.SwaggerUI(), "web/swagger-ui") })

// assets are embedded files by name, ready to serve.
type assets map[string]asset

// loadAssets reads every file of files (embedded from dir) once.
func loadAssets(files fs.FS, dir string) assets {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	out := assets{}
	for _, e := range entries {
		body, err := fs.ReadFile(files, e.Name())
		if err != nil {
			panic(err)
		}
		ct, ok := assetTypes[path.Ext(e.Name())]
		if !ok {
			panic(dir + "/" + e.Name() + ": no content type for its extension")
		}
		out[e.Name()] = asset{body: body, contentType: ct, etag: etagOf(body)}
	}
	return out
}

// names lists the files, but for except, sorted, as the document's enum.
func (as assets) names(except string) []any {
	var names []string
	for name := range as {
		if name != except {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out
}

// mediaTypes lists the files' content types, but for except's, without
// parameters.
func (as assets) mediaTypes(except string) []string {
	var out []string
	for name, a := range as {
		mt, _, _ := strings.Cut(a.contentType, ";")
		if name != except && !slices.Contains(out, mt) {
			out = append(out, mt)
		}
	}
	slices.Sort(out)
	return out
}

// swaggerUI serves the page. Its assets are named relative to it, so it
// must be asked for as /swagger-ui/: without the slash a browser would
// look for them at the root. ServeHTTP has already dropped the slash from
// the path, so the request line tells.
func (s *Server) swaggerUI(w http.ResponseWriter, r *http.Request) {
	swaggerHeaders(w)
	sent, _, _ := strings.Cut(r.RequestURI, "?")
	if !strings.HasSuffix(sent, "/") {
		w.Header().Set("Location", "swagger-ui/") // relative: survives a reverse proxy's prefix
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	s.serveAsset(w, r, "index.html")
}

func (s *Server) swaggerAsset(w http.ResponseWriter, r *http.Request) {
	s.serveAsset(w, r, r.PathValue("asset"))
}

// swaggerHeaders go on every answer under /swagger-ui/: it may not be
// framed. Only frame-ancestors, not the dashboard's whole policy: Swagger
// UI sets inline styles.
func swaggerHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Robots-Tag", "noindex, nofollow, noarchive")
}

func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	swaggerHeaders(w)
	a, ok := swaggerAssets()[name]
	if !ok {
		apierr.Write(w, apierr.NotFound, "no such file: /swagger-ui/"+name)
		return
	}
	serveFixed(w, r, a.contentType, a.body, a.etag)
}
