package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// parsedDepth is how deep the parser's tree for src nests, or false when
// the parser refuses src.
func parsedDepth(src []byte) (int, bool) {
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		return 0, false
	}
	depth := 0
	for _, d := range file.Docs {
		depth = max(depth, treeDepth(d.Body))
	}
	return depth, true
}

// treeDepth counts the mappings and lists that enclose the deepest node
// under n; a mapping of one pair may come as a bare MappingValueNode.
func treeDepth(n ast.Node) int {
	switch v := n.(type) {
	case *ast.MappingNode:
		d := 0
		for _, mv := range v.Values {
			d = max(d, treeDepth(mv.Key), treeDepth(mv.Value))
		}
		return 1 + d
	case *ast.MappingValueNode:
		return 1 + max(treeDepth(v.Key), treeDepth(v.Value))
	case *ast.SequenceNode:
		d := 0
		for _, item := range v.Values {
			d = max(d, treeDepth(item))
		}
		return 1 + d
	case *ast.MappingKeyNode:
		return treeDepth(v.Value)
	case *ast.AnchorNode:
		return treeDepth(v.Value)
	case *ast.TagNode:
		return treeDepth(v.Value)
	}
	return 0
}

// jsonDepth is how deep a valid JSON text nests, by encoding/json's
// tokens.
func jsonDepth(src []byte) int {
	dec := json.NewDecoder(bytes.NewReader(src))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// misread matches inputs goccy/go-yaml reads in a way of its own, where
// YAML does not allow them or means something else. There the scanner may
// count more levels than the parser builds, or one fewer (FuzzNesting).
var misread = regexp.MustCompile(`(?m)` + strings.Join([]string{
	// Properties that end a line or come before "- " or "? ", and aliases
	// or anchors without a name: it nests the next node under them or not,
	// by the tag's name and the tokens around.
	`(^|[ \t])![^ \r\n]*[ \t]*(#.*)?\r?$`,
	`(^|[ \t])![^ \r\n]*[ \t]+[-?]([ \t]|\r?$)`,
	`^[ \t]*&[^ \r\n]*[ \t]*(#.*)?\r?$`,
	`[&*]([^\w]|$)`,
	// Two tags in a row: what the second makes depends on the first's
	// name.
	`![^\s,]*\s+!`,
	// A line that starts with ':' after a scalar: it joins the two as a
	// mapping laid out its own way.
	`^[ \t]*:([ \t]|\r?$)`,
	// A tab in a double-quoted key: it drops the ':' after it.
	`"[^"]*\t`,
	// A second "---", or a "...": it may drop the documents that follow,
	// or read them as text.
	`(?s:^---.*^---)`,
	`^\.\.\.`,
	// A carriage return without a line feed: a line break in some places
	// and not in others.
	`\r([^\n]|$)`,
	// A tab in a line's indentation: it counts in some of its measures of
	// a column and not in others.
	`^ *\t`,
	// A key inside brackets that spans lines: it reads a second pair
	// after it as a mapping of its own.
	`[\[{][^\]}]*\n[^\]}]*:\s`,
	// A block scalar inside brackets, whose lines it reads as text (the
	// scanner counts what they hold): any '|' or '>' after a bracket.
	`(?s:[\[{].*[|>])`,
}, "|"))

// FuzzNesting feeds the nesting scanner arbitrary bytes. It must never
// panic. For every small input the YAML parser accepts and does not
// misread, the scanner must find exactly the depth of the parser's tree,
// and so refuse exactly when that is over the bound; where the parser
// misreads, at most one level fewer, so that the bound still holds to a
// level. For every valid JSON text it must find exactly the depth
// encoding/json reads.
func FuzzNesting(f *testing.F) {
	for _, s := range nestingSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const limit = 8 // small, so that small inputs cross it
		depth, at := nestingDepth(src, limit)
		if depth > limit+1 || at < 0 || at > len(src) {
			t.Fatalf("depth %d at offset %d of %d bytes, with limit %d", depth, at, len(src), limit)
		}
		// The parser is slow on some large inputs; small ones are where
		// the shapes are.
		want, ok := 0, false
		if len(src) <= 2048 {
			want, ok = parsedDepth(src)
		}
		if ok {
			exact := !misread.Match(src)
			if got := min(want, limit+1); exact && depth != got || depth < got-1 {
				t.Fatalf("%q: the parser's tree is %d deep, the scanner says %d (limit %d)", src, want, depth, limit)
			}
			if refused := CheckNesting(src) != nil; exact && refused != (want > MaxNesting) {
				t.Fatalf("%q: the parser's tree is %d deep; refused: %v", src, want, refused)
			}
		}
		if json.Valid(src) {
			if want := jsonDepth(src); min(want, limit+1) != depth {
				t.Fatalf("%q: the JSON text is %d deep, the scanner says %d (limit %d)", src, want, depth, limit)
			}
		}
	})
}

// nestingSeeds are the shapes the scanner must tell apart: every way YAML
// opens a level, and every kind of text where brackets mean nothing.
var nestingSeeds = []string{
	"a:\n  b:\n    - c\n    - [d, {e: f}]\n",
	"- - - a\n",
	"a:\n- b\n- c: d\n  e: f\n",
	"- a:\n  - b\n  c: d\n",
	"? a\n: - b\n",
	"- ? a\n  : b\n",
	"[a: b, c]\n",
	"{a: [b: c]}\n",
	"[- a, - b: c]\n",
	"{a: - b, c: [d]}\n",
	"[? a : [b]]\n",
	"[a:, b:]\n",
	"{\"a\":[1],\"b\":{\"c\":\"[[\"}}",
	"[1, \"x\\\"[[\", {\"y\": [null]}]\n",
	"a: |\n  [[[\n  {{{\nb: [c]\n",
	"a: >-\n  [[\n\n  ]]\n- |1\n x\n",
	"a: '[['' ]]'\nb: \"[[\\\" ]]\"\n",
	"a: b # [[[\nc: d#[[\n",
	"a: [b #c, [d]\n, [e]]\n",
	"a: b\n  - c\n  [d]\n",
	"a:\n  &x b: 1\nc: !!seq [*x]\n",
	"a:\r\n  b:\r  - c\n",
	"--- [a]\n--- [[b]]\n...\n",
	"%YAML 1.2\n---\n{a: {b: {c: {}}}}\n",
	"[it's, [x]]\n",
	"a: [[[[[[[[[[b]]]]]]]]]]\n",
	"{a: {a: {a: {a: {a: {a: {a: {a: {a: 1}}}}}}}}}\n",
}
