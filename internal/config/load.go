package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// MaxDocumentSize bounds a configuration document, as the admin API does.
const MaxDocumentSize = 1 << 20

// Load reads a document, fills in its defaults and applies the cross-field
// rules. The error is an *Invalid listing every violation found, each with
// its path and, where the source shows it, its line.
func Load(src []byte) (*Document, error) {
	root, err := parseRoot(src)
	if err != nil {
		return nil, err
	}
	doc, err := decodeDocument(root)
	if err != nil {
		return nil, err
	}
	if vs := Validate(doc); len(vs) > 0 {
		for i := range vs {
			vs[i].Line = lineOfPath(root, vs[i].Path)
		}
		return nil, &Invalid{Violations: vs}
	}
	return doc, nil
}

// proxyPath is a path inside proxies[i]: i, and what follows it.
var proxyPath = regexp.MustCompile(`^proxies\[(\d+)\]\.`)

// nameProxies makes every violation inside a proxy name it, as 1.1's do
// (“proxy `alpha`: ...“, SPEC §19.2), its path unchanged. The name is the
// one written, read from root: single when root is one proxy's document
// (an admin API body), else the whole document's proxies[i]. A message
// that names the proxy already, or a proxy whose name is not a plain
// string, is left as it is.
func nameProxies(root ast.Node, inv *Invalid, single bool) *Invalid {
	names := map[string]string{}
	ast.Walk(visitorFunc(func(n ast.Node) bool {
		path := nodePath(n)
		if v, ok := n.(*ast.StringNode); ok && (single && path == "name" || !single && strings.HasSuffix(path, "].name") && proxyPath.MatchString(path)) {
			names[strings.TrimSuffix(path, "name")] = v.Value
		}
		return true
	}), root)
	for i, v := range inv.Violations {
		var at string
		switch m := proxyPath.FindStringSubmatch(v.Path); {
		case single && v.Path != "" && v.Path != "name":
			at = ""
		case m != nil && v.Path != "proxies["+m[1]+"].name": // a bad name is not named by itself
			at = "proxies[" + m[1] + "]."
		default:
			continue
		}
		inv.Violations[i] = nameProxy(names[at], v)
	}
	return inv
}

// Parse reads a document and fills in its defaults without applying the
// cross-field rules. Every key is checked against the model before anything
// is decoded, so unknown keys, missing keys and bad values are all reported
// at once rather than one per attempt.
func Parse(src []byte) (*Document, error) {
	root, err := parseRoot(src)
	if err != nil {
		return nil, err
	}
	return decodeDocument(root)
}

func parseRoot(src []byte) (ast.Node, error) {
	if len(src) > MaxDocumentSize {
		return nil, invalid(Violation{Message: fmt.Sprintf("the document is %d bytes; at most %d are read", len(src), MaxDocumentSize)})
	}
	// Before the parser, whose memory grows with the square of the depth.
	if err := CheckNesting(src); err != nil {
		return nil, err
	}
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, invalid(syntaxViolation(err, src))
	}
	var bodies []ast.Node
	for _, d := range file.Docs {
		if d.Body != nil {
			bodies = append(bodies, d.Body)
		}
	}
	switch {
	case len(bodies) == 0:
		return nil, invalid(Violation{Message: "the document is empty"})
	case len(bodies) > 1:
		return nil, invalid(Violation{Message: "the file holds several YAML documents; a configuration is exactly one", Line: nodeLine(bodies[1])})
	}
	if size := expandedSize(bodies[0], map[string]int{}); size > maxExpandedNodes {
		return nil, invalid(Violation{Message: fmt.Sprintf("the document expands to more than %d values through its aliases", maxExpandedNodes)})
	}
	return bodies[0], nil
}

// maxExpandedNodes bounds what aliases may expand a document to: a small
// file must not decode into millions of values ("billion laughs").
const maxExpandedNodes = 200_000

// expandedSize counts the nodes a document decodes to, an alias counting as
// everything its anchor holds. Anchors precede their aliases in YAML, so
// one pass in document order sees each anchor before it is used.
func expandedSize(n ast.Node, anchors map[string]int) int {
	switch v := n.(type) {
	case nil:
		return 0
	case *ast.AnchorNode:
		size := expandedSize(v.Value, anchors)
		if name, ok := scalarText(v.Name); ok {
			anchors[name] = size
		}
		return size
	case *ast.AliasNode:
		name, _ := scalarText(v.Value)
		return anchors[name]
	case *ast.TagNode:
		return expandedSize(v.Value, anchors)
	case *ast.MappingNode:
		total := 1
		for _, mv := range v.Values {
			total += expandedSize(mv, anchors)
			if total > maxExpandedNodes {
				return total
			}
		}
		return total
	case *ast.MappingValueNode:
		return 1 + expandedSize(v.Key, anchors) + expandedSize(v.Value, anchors)
	case *ast.SequenceNode:
		total := 1
		for _, item := range v.Values {
			total += expandedSize(item, anchors)
			if total > maxExpandedNodes {
				return total
			}
		}
		return total
	}
	return 1
}

func decodeDocument(root ast.Node) (*Document, error) {
	if vs := check(root, reflect.TypeFor[Document]()); len(vs) > 0 {
		// The rules on what did parse, in the same report.
		vs = append(vs, rulesOnWhatParsed(root, vs)...)
		return nil, nameProxies(root, &Invalid{Violations: vs}, false)
	}
	var doc Document
	if err := yaml.NodeToValue(root, &doc, yaml.DisallowUnknownField()); err != nil {
		// check is meant to refuse everything the decoder would; this is
		// the decoder's word for anything it still found.
		return nil, invalid(decodeViolation(err, root))
	}
	doc.Normalize()
	return &doc, nil
}

// lineOfPath finds where a rule's path is written, for the message. A rule
// about a default that was left out has no line.
func lineOfPath(root ast.Node, path string) int {
	line := 0
	ast.Walk(visitorFunc(func(n ast.Node) bool {
		if line == 0 && nodePath(n) == path {
			line = nodeLine(n)
		}
		return line == 0
	}), root)
	return line
}

// ParseProxy reads one proxy document (the admin API's create and update
// bodies) and fills in its defaults.
func ParseProxy(src []byte) (*Proxy, error) {
	root, err := parseRoot(src)
	if err != nil {
		return nil, err
	}
	if vs := check(root, reflect.TypeFor[Proxy]()); len(vs) > 0 {
		vs = append(vs, proxyRulesOnWhatParsed(root, vs)...)
		return nil, nameProxies(root, &Invalid{Violations: vs}, true)
	}
	var p Proxy
	if err := yaml.NodeToValue(root, &p, yaml.DisallowUnknownField()); err != nil {
		return nil, invalid(decodeViolation(err, root))
	}
	p.Normalize()
	return &p, nil
}

func invalid(v Violation) *Invalid { return &Invalid{Violations: []Violation{v}} }

// syntaxViolation says where the parser stopped (line and column) and what
// it expected; a tab in the indentation, which YAML refuses, is said so,
// and a key indented unlike its neighbours is named with the fix.
func syntaxViolation(err error, src []byte) Violation {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		tk := ye.GetToken()
		line, column := tk.Position.Line, tk.Position.Column
		msg := ye.GetMessage()
		if strings.Contains(msg, "'\t'") {
			msg = "tabs are not allowed for indentation; indent with spaces"
		} else if strings.HasSuffix(msg, "value is not allowed in this context") {
			// A key indented deeper than its neighbours continues the value
			// above it, and the parser stops at its colon on the next line:
			// that line is the one to fix.
			if strings.HasPrefix(msg, "mapping") && tk.Next != nil && tk.Next.Position.Line > line {
				line = tk.Next.Position.Line
				column = indentOf(sourceLine(src, line)) + 1
			}
			msg += "; " + indentationHint(src, line, column)
		}
		return Violation{Message: fmt.Sprintf("YAML syntax error at column %d: %s", column, msg), Line: line}
	}
	return Violation{Message: "YAML syntax error: " + err.Error()}
}

// indentationHint names the key on line at column and how it is indented
// against the line above it.
func indentationHint(src []byte, line, column int) string {
	key, _, _ := strings.Cut(strings.TrimSpace(sourceLine(src, line)), ":")
	key = strings.TrimSpace(strings.TrimPrefix(key, "- "))
	hint := fmt.Sprintf("check the indentation of line %d: `%s` starts in column %d", line, key, column)
	for above := line - 1; above >= 1; above-- {
		text := sourceLine(src, above)
		if t := strings.TrimSpace(text); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		switch c := keyColumn(text); {
		case c < column:
			hint += fmt.Sprintf(", deeper than line %d (column %d), so it reads as more of that line's value", above, c)
		case c > column:
			hint += fmt.Sprintf(", and lines up with no key above it (line %d starts in column %d)", above, c)
		default:
			hint += fmt.Sprintf(", as line %d does", above)
		}
		break
	}
	return hint + "; the keys of one mapping start in the same column"
}

// sourceLine is the 1-based line of src, "" past its end.
func sourceLine(src []byte, line int) string {
	for n, text := range strings.Split(string(src), "\n") {
		if n+1 == line {
			return strings.TrimSuffix(text, "\r")
		}
	}
	return ""
}

func indentOf(text string) int { return len(text) - len(strings.TrimLeft(text, " ")) }

// keyColumn is the 1-based column a line's key starts in: past the dash
// of a list item.
func keyColumn(text string) int {
	c := indentOf(text) + 1
	if rest := strings.TrimLeft(text, " "); strings.HasPrefix(rest, "- ") {
		c += 2 + indentOf(rest[2:])
	}
	return c
}

func decodeViolation(err error, root ast.Node) Violation {
	var ve *valueError
	if errors.As(err, &ve) {
		return ve.v
	}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		return Violation{Path: pathOfToken(root, ye.GetToken().Position.Offset), Message: ye.GetMessage(), Line: ye.GetToken().Position.Line}
	}
	return Violation{Message: err.Error()}
}

// pathOfToken finds the path of the node a decoder error points at.
func pathOfToken(root ast.Node, offset int) string {
	var found string
	ast.Walk(visitorFunc(func(n ast.Node) bool {
		if tk := n.GetToken(); tk != nil && tk.Position.Offset == offset && found == "" {
			found = nodePath(n)
		}
		return found == ""
	}), root)
	return found
}

type visitorFunc func(ast.Node) bool

func (f visitorFunc) Visit(n ast.Node) ast.Visitor {
	if f(n) {
		return f
	}
	return nil
}

var (
	nodeUnmarshaler = reflect.TypeFor[yaml.NodeUnmarshaler]()
	headerNameType  = reflect.TypeFor[HeaderName]()
)

// unknownKeyHints explains keys that exist elsewhere or used to exist.
var unknownKeyHints = map[string]string{
	"server.workers": "is not a setting: the worker count is the --workers flag (DOPPEL_WORKERS)",
	"access.list":    "cannot be overridden per proxy; a proxy's access may set only read, update, delete and upload",
	"access.create":  "cannot be overridden per proxy; a proxy's access may set only read, update, delete and upload",
}

// requiredHints say what to write for a required key a first document
// leaves out.
var requiredHints = map[string]string{
	"server":      ": where the proxy listens, for example `server: {host: 127.0.0.1, port: 8080}`",
	"server.host": ": the IP address the proxy listens on, for example `host: 127.0.0.1` (0.0.0.0 for every interface)",
	"server.port": ": the proxy's port, for example `port: 8080`",
	"admin": ": where the admin API and the dashboard listen, for example `admin: {host: 127.0.0.1, port: 8081}`; " +
		"once it serves, `doppel token add --name me --group admin --config <this file>` adds a token for them (examples/main.yaml has a whole document)",
	"admin.host": ": the IP address the admin API listens on, for example `host: 127.0.0.1`",
	"admin.port": ": the admin API's port, for example `port: 8081`; it differs from server.port",
}

// check walks a node against the Go type it will be decoded into and
// reports every unknown key, missing required key and value a type refuses.
func check(n ast.Node, t reflect.Type) []Violation {
	if isNull(n) || unwrap(n).Type() == ast.AliasType {
		return nil
	}
	n = unwrap(n)
	if reflect.PointerTo(t).Implements(nodeUnmarshaler) {
		v := reflect.New(t).Interface().(yaml.NodeUnmarshaler)
		if err := v.UnmarshalYAML(n); err != nil {
			return []Violation{decodeViolation(err, n)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return check(n, t.Elem())
	case reflect.Struct:
		return checkStruct(n, t)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			return []Violation{{Path: nodePath(n), Message: "must be a list, not " + describe(n), Line: nodeLine(n)}}
		}
		var vs []Violation
		for i, item := range seq.Values {
			if isNull(item) {
				vs = append(vs, Violation{Path: fmt.Sprintf("%s[%d]", nodePath(n), i), Message: "an entry may not be empty", Line: nodeLine(item)})
				continue
			}
			vs = append(vs, check(item, t.Elem())...)
		}
		return vs
	case reflect.Map:
		return checkMap(n, t)
	case reflect.Bool:
		if _, err := boolValue(n); err != nil {
			return []Violation{decodeViolation(err, n)}
		}
	case reflect.String:
		if _, err := stringValue(n, "a string"); err != nil {
			return []Violation{decodeViolation(err, n)}
		}
	}
	return nil
}

func pairs(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

func keyText(mv *ast.MappingValueNode) string {
	s, _ := scalarText(mv.Key)
	return s
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func checkStruct(n ast.Node, t reflect.Type) []Violation {
	ps, ok := pairs(n)
	if !ok {
		return []Violation{{Path: nodePath(n), Message: "must be a mapping, not " + describe(n), Line: nodeLine(n)}}
	}
	base := nodePath(n)
	var vs []Violation
	for _, mv := range ps {
		key := keyText(mv)
		f, ok := fieldByKey(t, key)
		if !ok {
			vs = append(vs, unknownKey(base, key, t, mv))
			continue
		}
		vs = append(vs, check(mv.Value, f.Type)...)
	}
	for i := range t.NumField() {
		f := t.Field(i)
		key := yamlKey(f)
		if f.Tag.Get("required") != "true" {
			continue
		}
		present := false
		for _, mv := range ps {
			if keyText(mv) == key && !isNull(mv.Value) {
				present = true
			}
		}
		if !present {
			path := joinPath(base, key)
			vs = append(vs, Violation{Path: path, Message: "is required" + requiredHints[path], Line: nodeLine(n)})
		}
	}
	return vs
}

func unknownKey(base, key string, t reflect.Type, mv *ast.MappingValueNode) Violation {
	path := joinPath(base, key)
	msg := ""
	for suffix, hint := range unknownKeyHints {
		if path == suffix || strings.HasSuffix(path, "."+suffix) {
			msg = hint
		}
	}
	if msg == "" {
		var known []string
		for i := range t.NumField() {
			known = append(known, yamlKey(t.Field(i)))
		}
		msg = fmt.Sprintf("unknown key %s; known keys here are %s", quote(key), strings.Join(known, ", "))
	}
	return Violation{Path: path, Message: msg, Line: nodeLine(mv.Key)}
}

func checkMap(n ast.Node, t reflect.Type) []Violation {
	ps, ok := pairs(n)
	if !ok {
		return []Violation{{Path: nodePath(n), Message: "must be a mapping, not " + describe(n), Line: nodeLine(n)}}
	}
	base := nodePath(n)
	var vs []Violation
	// The parser refuses a key written twice; header names are also
	// duplicates when they differ only in case.
	var seen []string
	foldCase := t.Key() == headerNameType
	for _, mv := range ps {
		key := keyText(mv)
		if key == "" {
			vs = append(vs, Violation{Path: base, Message: "a key may not be empty", Line: nodeLine(mv.Key)})
			continue
		}
		if reflect.PointerTo(t.Key()).Implements(nodeUnmarshaler) {
			k := reflect.New(t.Key()).Interface().(yaml.NodeUnmarshaler)
			if err := k.UnmarshalYAML(mv.Key); err != nil {
				v := decodeViolation(err, mv.Key)
				v.Path = joinPath(base, key)
				vs = append(vs, v)
				continue
			}
		}
		if foldCase {
			folded := strings.ToLower(key)
			if slices.Contains(seen, folded) {
				vs = append(vs, Violation{Path: joinPath(base, key), Message: "duplicate header (header names are matched case-insensitively)", Line: nodeLine(mv.Key)})
				continue
			}
			seen = append(seen, folded)
		}
		if isNull(mv.Value) {
			vs = append(vs, Violation{Path: joinPath(base, key), Message: "a value is required", Line: nodeLine(mv.Key)})
			continue
		}
		vs = append(vs, check(mv.Value, t.Elem())...)
	}
	return vs
}

func isNull(n ast.Node) bool {
	return n == nil || unwrap(n) == nil || unwrap(n).Type() == ast.NullType
}

func yamlKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlKey(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
