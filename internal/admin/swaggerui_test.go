package admin

import (
	"net/http"
	"strings"
	"testing"
)

// Swagger UI may not be framed, whatever it answers. Its policy is only
// frame-ancestors: the dashboard's would block the inline styles it sets.
func TestSwaggerUIIsNotFramed(t *testing.T) {
	for _, dashboard := range []string{"", "  dashboard: false\n"} {
		e := newEnv(t, strings.Replace(baseDoc, "  port: 8081\n", "  port: 8081\n"+dashboard, 1), nil)
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, c := range []struct {
			path   string
			status int
		}{
			{"/swagger-ui", 301}, {"/swagger-ui/", 200}, {"/swagger-ui/swagger-ui.css", 200}, {"/swagger-ui/nothing.js", 404},
		} {
			res, err := noRedirect.Get(e.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.status {
				t.Errorf("%s: %d, want %d", c.path, res.StatusCode, c.status)
			}
			if got := res.Header.Get("Content-Security-Policy"); got != "frame-ancestors 'none'" {
				t.Errorf("%s (dashboard %q): Content-Security-Policy %q", c.path, dashboard, got)
			}
			if got := res.Header.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("%s (dashboard %q): X-Frame-Options %q", c.path, dashboard, got)
			}
		}
	}
}
