package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The vendored files are the package's, byte for byte, and the README
// beside them says which version and checksums they are.
func TestVendoredFilesMatchTheReadme(t *testing.T) {
	for _, c := range []struct {
		dir   string
		files fs.FS
		least int
		own   []string
	}{
		{"swagger-ui", SwaggerUI(), 5, []string{"index.html", "index.css", "swagger-initializer.js"}},
		{"dashboard", Dashboard(), 2, []string{"index.html", "app.css", "app.js", "api.js", "form.js", "proxy.js", "faults.js", "requests.js"}},
	} {
		readme, err := os.ReadFile(c.dir + "/README.md")
		if err != nil {
			t.Fatal(err)
		}
		rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([0-9a-f]{64})` \\|$").FindAllStringSubmatch(string(readme), -1)
		if len(rows) < c.least {
			t.Fatalf("%s/README.md lists %d checksums", c.dir, len(rows))
		}
		for _, row := range rows {
			body, err := fs.ReadFile(c.files, row[1])
			if err != nil {
				t.Errorf("%s/%s is listed but not embedded: %v", c.dir, row[1], err)
				continue
			}
			sum := sha256.Sum256(body)
			if hex.EncodeToString(sum[:]) != row[2] {
				t.Errorf("%s/%s differs from the README's checksum: update both together", c.dir, row[1])
			}
		}
		for _, own := range c.own {
			if _, err := fs.Stat(c.files, own); err != nil {
				t.Errorf("%s/%s: %v", c.dir, own, err)
			}
		}
	}
}

// The dashboard runs under a Content-Security-Policy without
// 'unsafe-inline' and shows data only as text: no inline script or style
// in the page, no style attribute or handler, and no innerHTML anywhere.
// The one element with content is the configuration, which is data
// (application/json), filled in by the server.
func TestDashboardHasNothingInline(t *testing.T) {
	page, err := fs.ReadFile(Dashboard(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	const config = `<script id="doppel-config" type="application/json">{{config}}</script>`
	if !bytes.Contains(page, []byte(config)) {
		t.Fatalf("index.html lacks %s", config)
	}
	page = bytes.Replace(page, []byte(config), nil, 1)
	if strings.Contains(string(page), "<style") || regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).Match(page) ||
		regexp.MustCompile(`\s(?:style|on[a-z]+)=`).Match(page) {
		t.Errorf("index.html has inline script or style")
	}
	// Every script of ours; js-yaml is vendored, checked by its checksum.
	scripts, _ := fs.Glob(Dashboard(), "*.js")
	if len(scripts) < 6 {
		t.Fatalf("only %v", scripts)
	}
	for _, f := range scripts {
		if f == "js-yaml.js" {
			continue
		}
		src, err := fs.ReadFile(Dashboard(), f)
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\.style\.|setAttribute\(['"]style|eval\(|new Function`).Find(src); m != nil {
			t.Errorf("%s uses %s: data must go through textContent and DOM APIs, styles through classes", f, m)
		}
	}
}
