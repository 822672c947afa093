package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDashboardPageThroughTheBinary: the page as 1.1 serves it. It is
// never cached and carries the configuration in its doppel-config element
// (the title, which cannot close the element, the token header, whether
// the API is public); every client route answers it; its files are under
// content-hashed names, cached for good; the icon is /favicon.ico.
func TestDashboardPageThroughTheBinary(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, edit, header string
		public             bool
	}{
		{"tokens", "", "X-Proxy-Authorization", false},
		{"public", "  public: true\n  auth: {header: X-Admin-Token}\n", "X-Admin-Token", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ports := freePorts(t, 2)
			doc := strings.Replace(dashboardDoc(dir, ports[0], ports[1]), `  title: "Doppel <staging>"`, `  title: "</script><script>alert(1)</script>"`+"\n"+c.edit, 1)
			if c.public {
				doc = strings.Replace(doc, "  access:\n    list: public\n    read: public\n", "", 1)
			}
			cfg := writeFile(t, dir, "main.yaml", doc)
			p := startProc(t, invocation{args: []string{"serve", "--config", cfg}})
			p.waitServing()
			base := "http://127.0.0.1:" + strconv.Itoa(ports[1])
			waitListening(t, p, "127.0.0.1:"+strconv.Itoa(ports[1]))
			get := func(path string) (*http.Response, string) {
				t.Helper()
				res, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res, string(b)
			}

			var page string
			for _, route := range []string{"/", "/status", "/requests", "/proxies/zeta", "/anything/deeper"} {
				res, body := get(route)
				if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || res.Header.Get("Cache-Control") != "no-store" {
					t.Fatalf("%s: %d %v", route, res.StatusCode, res.Header)
				}
				if route == "/" {
					page = body
				}
			}
			_, rest, ok := strings.Cut(page, `<script id="doppel-config" type="application/json">`)
			if !ok {
				t.Fatalf("no doppel-config element:\n%s", page)
			}
			raw, _, _ := strings.Cut(rest, "</script>")
			var config map[string]any
			if err := json.Unmarshal([]byte(raw), &config); err != nil {
				t.Fatalf("doppel-config %q: %v", raw, err)
			}
			if config["title"] != "</script><script>alert(1)</script>" || config["authHeader"] != c.header || config["public"] != c.public {
				t.Errorf("doppel-config: %v", config)
			}
			if n := strings.Count(page, "<script"); n != 2 {
				t.Errorf("%d script elements, want the config and the module:\n%s", n, page)
			}

			m := regexp.MustCompile(`src="\./(static/assets/app-[0-9a-f]{10}\.js)"`).FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("the page loads no hashed module:\n%s", page)
			}
			res, js := get("/" + m[1])
			if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
				res.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || !strings.Contains(js, "./api-") {
				t.Errorf("%s: %d %v", m[1], res.StatusCode, res.Header)
			}
			if res, _ := get("/static/app.js"); res.StatusCode != 404 {
				t.Errorf("an unhashed name is served: %d", res.StatusCode)
			}
			res, ico := get("/favicon.ico")
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/x-icon" || !strings.HasPrefix(ico, "\x00\x00\x01\x00") {
				t.Errorf("/favicon.ico: %d %v", res.StatusCode, res.Header)
			}
		})
	}
}
