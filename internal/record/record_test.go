package record

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/doppelproxy/doppel/internal/jinja"
)

// rendered is what the template Verbatim makes of s renders to.
func rendered(t testing.TB, s string) (string, error) {
	tpl, err := jinja.Compile(Verbatim(s))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = tpl.Execute(&b, jinja.NewVars())
	return b.String(), err
}

func TestVerbatimRendersItsText(t *testing.T) {
	for _, s := range []string{
		"", "plain", "{", "}", "{}", "{{ x }}", "{% if y %}no{% endif %}", "{# c #}", "{{{", "{%%}", "a{{b}}c{%d%}e{#f#}",
		`{"json": {"nested": {}}}`, "{% raw %}tail{% endraw %}", "{{ '}}' }}", "ends with {", "a\n", "a\r\n", "\r", "a\rb", "a\n\n", "\n", "{\n",
	} {
		got, err := rendered(t, s)
		if err != nil || got != s {
			t.Errorf("%q renders %q (%v)", s, got, err)
		}
	}
}

// FuzzVerbatim: any UTF-8 text, through Verbatim and the renderer the mocks
// use, comes back as it was.
func FuzzVerbatim(f *testing.F) {
	for _, s := range []string{"{{ x }}", "{%", "{#", "{{{", `{"a": "{{"}`, "é{%-x-%}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 4096 {
			return
		}
		got, err := rendered(t, s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got != s {
			t.Fatalf("%q renders %q", s, got)
		}
	})
}

// FuzzBytes: any bytes, through Bytes and the renderer, come back as they
// were.
func FuzzBytes(f *testing.F) {
	for _, s := range []string{"\x89PNG\r\n\x1a\n\x00", `"\`, "{{ x }}", "\xff\xfe", "é"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		tpl, err := jinja.Compile(Bytes(b))
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		var out strings.Builder
		if err := tpl.Execute(&out, jinja.NewVars()); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if out.String() != string(b) {
			t.Fatalf("%q renders %q", b, out.String())
		}
	})
}
