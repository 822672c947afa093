package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// selectorDoc is a valid document whose one mock reads query variable v
// through sel, a YAML scalar written as is.
func selectorDoc(sel string) string {
	return mockDoc("name: m\nrequest: {method: GET, url: '^/x$', query: {v: " + sel + "}}\nresponse: {status: 200}")
}

// yamlQuote writes s as a YAML double-quoted scalar that reads back as s.
// s must be valid UTF-8.
func yamlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x80 && unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// loadSelector loads the document with sel spliced in and returns the
// selector it holds, if the document was accepted.
func loadSelector(sel string) (Selector, bool) {
	d, err := Load([]byte(selectorDoc(sel)))
	if err != nil {
		return Selector{}, false
	}
	return d.Proxies[0].Mocks[0].Request.Query["v"], true
}

// FuzzSelector feeds Selector.UnmarshalYAML, through Load, arbitrary
// selectors: quoted, so the selector is exactly the fuzzed string, or
// spliced raw into the YAML, so the scalar's own syntax is fuzzed too. It
// must never panic; a selector it accepts has keys, none empty or holding
// a dot, and its String() reads back as the same keys.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{
		".filter", ".content.items", ".a", ".a.b.c", ".", "..", ".a.", ".a..b", "a", "",
		".a[0]", ".a]", ".é.ü", ".a b", ".a\x00b", ".a\nb", ".\u2028", "'.a'", "[.a]", "{a: .b}",
		".a # c", "&x .a", "*x", "!!str .a", "|\n  .a", "~", "null", ".1.2", ".\"", ".\\", ".a\xffb",
	} {
		f.Add(false, s)
		f.Add(true, s)
	}
	f.Fuzz(func(t *testing.T, raw bool, s string) {
		spliced := s
		if !raw {
			if !utf8.ValidString(s) {
				return // a YAML document is text
			}
			spliced = yamlQuote(s)
		}
		sel, ok := loadSelector(spliced)
		if !ok {
			return
		}
		keys := sel.Keys()
		if len(keys) == 0 {
			t.Fatalf("selector %q accepted with no keys", s)
		}
		for _, k := range keys {
			if k == "" || strings.Contains(k, ".") {
				t.Fatalf("selector %q accepted with key %q (keys %q)", s, k, keys)
			}
		}
		if !raw && sel.String() != s {
			t.Fatalf("selector %q reads back as %q", s, sel.String())
		}
		if !utf8.ValidString(sel.String()) {
			return // yamlQuote cannot write it; the raw splice was read as is
		}
		again, ok := loadSelector(yamlQuote(sel.String()))
		if !ok {
			t.Fatalf("selector %q accepted, but its String() %q is refused", s, sel.String())
		}
		if !slices.Equal(again.Keys(), keys) {
			t.Fatalf("selector %q has keys %q; its String() %q re-parses to %q", s, keys, sel.String(), again.Keys())
		}
	})
}
