package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
)

// The engine is registered with the configuration's rules by importing
// this package: a template that does not parse is V21, a variable nothing
// binds is V22, both worded as the rules word them.
func TestTemplatesAreCheckedOnceRenderIsLinked(t *testing.T) {
	if config.TemplateEngine == nil {
		t.Fatal("config.TemplateEngine is not set: documents' templates would go unchecked")
	}
	doc := `server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081}
proxies:
  - name: shop
    type: http
    url: http://h
    mocks:
      - name: broken
        request: {method: GET, url: /broken}
        response: {status: 200, body: "{{ unclosed"}
`
	_, err := config.Load([]byte(doc))
	var inv *config.Invalid
	if !errors.As(err, &inv) || len(inv.Violations) != 1 || inv.Violations[0].Rule != "V21" ||
		!strings.Contains(inv.Violations[0].Message, "`body` is not a valid template: it does not parse: ") {
		t.Fatalf("a template that does not parse: %v", err)
	}
	d, err := config.Load([]byte(strings.Replace(doc, "{{ unclosed", "{{ nobody }}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var v22 []config.Advisory
	for _, a := range config.Advisories(d) {
		if a.Rule == "V22" {
			v22 = append(v22, a)
		}
	}
	if len(v22) != 1 || !strings.HasPrefix(v22[0].Message, "the template reads `nobody` (line 1, column 4), which nothing binds") {
		t.Fatalf("a variable nothing binds: %v", v22)
	}
}
