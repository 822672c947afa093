package admin

import (
	"net/http"
	"strings"
)

// Route is the route template a request matches ("/api/v1/proxies/{name}",
// never the concrete path), or "" when it matches none: the label the
// admin metrics use, so that a hundred proxies are one series.
func (s *Server) Route(r *http.Request) string {
	mux, ok := s.handler.(*http.ServeMux)
	if !ok {
		return ""
	}
	_, pattern := mux.Handler(withoutTrailingSlash(r))
	if _, path, ok := strings.Cut(pattern, " "); ok {
		pattern = path
	}
	if pattern == "/" {
		return ""
	}
	return pattern
}
