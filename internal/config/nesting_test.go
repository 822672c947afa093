package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nestingShapes write the value of a top-level key "extra" that nests n
// collections deep, the document's own mapping making n+1. line is the
// line of the document (after the two of doc's header) where the n-th
// level opens.
var nestingShapes = []struct {
	name  string
	value func(n int) string
	line  func(n int) int
}{
	{"flow lists", func(n int) string {
		return "extra: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"
	}, func(int) int { return 3 }},
	{"flow maps", func(n int) string {
		return "extra: " + strings.Repeat("{a: ", n) + "1" + strings.Repeat("}", n) + "\n"
	}, func(int) int { return 3 }},
	{"flow maps in JSON", func(n int) string {
		return `"extra": ` + strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) + "\n"
	}, func(int) int { return 3 }},
	{"block maps", func(n int) string {
		var b strings.Builder
		b.WriteString("extra:\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "%sa:\n", strings.Repeat(" ", i))
		}
		fmt.Fprintf(&b, "%sa: 1\n", strings.Repeat(" ", n))
		return b.String()
	}, func(n int) int { return 3 + n }},
	{"block lists", func(n int) string {
		var b strings.Builder
		b.WriteString("extra:\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "%s-\n", strings.Repeat(" ", i))
		}
		fmt.Fprintf(&b, "%s- 1\n", strings.Repeat(" ", n))
		return b.String()
	}, func(n int) int { return 3 + n }},
	{"block lists on one line", func(n int) string {
		return "extra:\n  " + strings.Repeat("- ", n) + "1\n"
	}, func(int) int { return 4 }},
	{"block maps, then block lists, then flow", func(n int) string {
		var b strings.Builder
		b.WriteString("extra:\n")
		col := 2
		for range n / 3 {
			fmt.Fprintf(&b, "%sa:\n", strings.Repeat(" ", col))
			col += 2
		}
		lists := n / 3
		fmt.Fprintf(&b, "%s%s", strings.Repeat(" ", col), strings.Repeat("- ", lists))
		flows := n - n/3 - lists
		b.WriteString(strings.Repeat("[{a: ", flows/2) + strings.Repeat("[", flows%2) + strings.Repeat("]", flows%2) + strings.Repeat("}]", flows/2) + "\n")
		return b.String()
	}, func(n int) int { return 3 + n/3 + 1 }},
	{"merge keys after text", func(n int) string {
		// The parser reads "<<:" as a key at its own column, whatever is
		// before it on the line.
		var b strings.Builder
		b.WriteString("extra:\n")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%s<<: \n", strings.Repeat("0", i))
		}
		return b.String()
	}, func(n int) int { return 3 + n }},
	{"tags that end a line", func(n int) string {
		// The parser nests each mapping under the tag before it, whatever
		// the indentation.
		return "extra: !t\n" + strings.Repeat("a: !t\n", n-1) + "a: 1\n"
	}, func(n int) int { return 3 + n }},
}

// TestNestingBound: a document nested MaxNesting deep is read to the end
// (and refused only for its unknown key), one level deeper is refused
// before it is parsed, with the bound and the line where it is crossed.
func TestNestingBound(t *testing.T) {
	for _, sh := range nestingShapes {
		t.Run(sh.name, func(t *testing.T) {
			at := doc(sh.value(MaxNesting - 1))
			if err := CheckNesting([]byte(at)); err != nil {
				t.Fatalf("%d levels refused: %v\n%s", MaxNesting, err, at)
			}
			vs := violations(t, at)
			if len(vs) != 1 || vs[0].Path != "extra" || !strings.Contains(vs[0].Message, "unknown key") {
				t.Fatalf("%d levels: want only extra's unknown key, got:\n%s", MaxNesting, (&Invalid{vs}).Error())
			}

			over := doc(sh.value(MaxNesting))
			vs = violations(t, over)
			want := fmt.Sprintf("nested deeper than %d levels, the bound on a document's nesting (line %d)", MaxNesting, sh.line(MaxNesting))
			if len(vs) != 1 || vs[0].String() != want {
				t.Fatalf("%d levels: want %q, got:\n%s", MaxNesting+1, want, (&Invalid{vs}).Error())
			}
		})
	}
}

// TestTextDoesNotNest: brackets, dashes and colons inside quoted
// scalars, comments, block scalars and plain scalars are text. Beside
// each, a list nested to the bound is read and one level more refused:
// the text adds nothing to the count.
func TestTextDoesNotNest(t *testing.T) {
	deep := strings.Repeat("[", 100) + strings.Repeat("{", 100)
	for _, c := range []struct{ name, value string }{
		{"double quotes", `extra: "` + deep + ` \" ` + deep + `"`},
		{"double quotes across lines", "extra: \"" + deep + "\n  " + deep + "\""},
		{"single quotes", `extra: '` + deep + ` '' ` + deep + `'`},
		{"quoted keys", `extra: {"` + deep + `": 1, '` + deep + `': 2}`},
		{"a comment after a value", "extra: 1 # " + deep},
		{"a comment line", "# " + deep + "\nextra: 1"},
		{"a comment inside brackets", "extra: [1, # " + deep + "\n  2]"},
		{"a literal block scalar", "extra: |\n  " + deep + "\n  - - - - a: b\n  a:\n    b: [\n"},
		{"a folded block scalar", "extra: >-\n  " + deep + "\n\n  " + deep},
		{"a block scalar in a list", "extra:\n  - |2\n     " + deep + "\n  - x"},
		{"a plain scalar", "extra: a" + deep},
		{"a plain scalar's next line", "extra: a\n  " + deep},
		{"a key's text", "extra:\n  a" + deep + ": 1"},
		{"inside brackets, all at once", "extra: [\"" + deep + "\", '" + deep + "', # " + deep + "\n  it's]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The document's mapping is the first level.
			levels := func(n int) string {
				return doc(c.value + "\nother: " + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "\n")
			}
			at := levels(MaxNesting)
			if err := CheckNesting([]byte(at)); err != nil {
				t.Fatalf("refused: %v\n%s", err, at)
			}
			for _, v := range violations(t, at) {
				if strings.Contains(v.Message, "nested deeper") {
					t.Fatalf("refused for nesting: %s\n%s", v, at)
				}
			}
			over := levels(MaxNesting + 1)
			if vs := violations(t, over); len(vs) != 1 || !strings.Contains(vs[0].Message, "nested deeper than 64 levels") {
				t.Fatalf("one level over the bound: want the bound, got:\n%s", (&Invalid{vs}).Error())
			}
		})
	}
}

// TestNestingBoundsEveryReader: Parse and ParseProxy refuse as Load does,
// before anything is parsed.
func TestNestingBoundsEveryReader(t *testing.T) {
	deep := doc("extra: " + strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting) + "\n")
	body := `{"name": "zeta", "type": "http", "url": "http://h", "headers": ` + strings.Repeat(`{"a":`, MaxNesting) + `"v"` + strings.Repeat("}", MaxNesting) + `}`
	for _, c := range []struct {
		name string
		read func() error
	}{
		{"Parse", func() error { _, err := Parse([]byte(deep)); return err }},
		{"ParseProxy", func() error { _, err := ParseProxy([]byte(body)); return err }},
	} {
		var inv *Invalid
		if err := c.read(); !errors.As(err, &inv) || len(inv.Violations) != 1 || !strings.Contains(inv.Violations[0].Message, "nested deeper than 64 levels") {
			t.Errorf("%s: want the nesting bound, got %v", c.name, err)
		}
	}
}

// TestJSONNesting: JSON texts, such as the admin API's bodies, nest as
// encoding/json reads them.
func TestJSONNesting(t *testing.T) {
	for _, c := range []struct {
		src   string
		depth int
	}{
		{`"[[["`, 0},
		{`[]`, 1},
		{`{"a": [1, {"b": "]]"}], "c": {}}`, 3},
		{`[[["\"[", "\\"], {"x\u005b": []}]]`, 4},
		{"{\n  \"a\":\n    [\n      {\"b\": [\"#\"]}\n    ]\n}", 4},
		{strings.Repeat(`{"a":`, 64) + "0" + strings.Repeat("}", 64), 64},
	} {
		if got, _ := nestingDepth([]byte(c.src), MaxNesting); got != c.depth {
			t.Errorf("%s: depth %d, want %d", c.src, got, c.depth)
		}
		if jsonDepth([]byte(c.src)) != c.depth {
			t.Errorf("%s: encoding/json reads depth %d, want %d", c.src, jsonDepth([]byte(c.src)), c.depth)
		}
	}
	over := strings.Repeat(`[`, 65) + strings.Repeat("]", 65)
	if err := CheckNesting([]byte(over)); err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels, the bound on a document's nesting (line 1)") {
		t.Errorf("65 levels of JSON: %v", err)
	}
}
