package config

import (
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Every problem at once: the cross-field rules run on what parsed. The
// entries whose key or value was refused are taken out of the tree, the
// rest is decoded and checked, and a rule's violation is kept only when
// it does not rest on a field that failed, so nothing is reported twice
// or against a value the user did not write.

// rulesOnWhatParsed returns the rule violations of the document root holds
// with the failed entries taken out, or nil when that cannot be done
// safely (a failed list item, a document that still does not decode).
func rulesOnWhatParsed(root ast.Node, failed []Violation) []Violation {
	return onWhatParsed(root, failed, func(d *Document) []Violation { return Validate(d) })
}

// proxyRulesOnWhatParsed is the same for one proxy's document (an admin
// API body): the rules that read the proxy alone.
func proxyRulesOnWhatParsed(root ast.Node, failed []Violation) []Violation {
	return onWhatParsed(root, failed, func(p *Proxy) []Violation { return validateProxy("", *p) })
}

// onWhatParsed decodes root with the failed entries pruned into a T,
// normalises it, and keeps the violations of rules that do not rest on a
// failure.
func onWhatParsed[T any, PT interface {
	*T
	Normalize()
}](root ast.Node, failed []Violation, rules func(PT) []Violation) []Violation {
	paths := make([]string, 0, len(failed))
	for _, v := range failed {
		if v.Path == "" || strings.HasSuffix(v.Path, "]") {
			return nil // a whole item or the document: its neighbours' paths would shift
		}
		paths = append(paths, v.Path)
	}
	var value T
	if err := yaml.NodeToValue(prune(root, paths), &value, yaml.DisallowUnknownField()); err != nil {
		return nil
	}
	PT(&value).Normalize()
	var out []Violation
	for _, v := range rules(&value) {
		if !restsOnFailure(v, paths) {
			v.Line = lineOfPath(root, v.Path)
			out = append(out, v)
		}
	}
	return out
}

// prune takes out of root every mapping entry at one of paths; the
// document is parsed afresh for each load, so it may be changed.
func prune(root ast.Node, paths []string) ast.Node {
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		switch m := unwrap(n).(type) {
		case *ast.MappingNode:
			m.Values = slices.DeleteFunc(m.Values, func(mv *ast.MappingValueNode) bool {
				return slices.Contains(paths, nodePath(mv.Key)) || slices.Contains(paths, nodePath(mv.Value))
			})
			for _, mv := range m.Values {
				walk(mv.Value)
			}
		case *ast.MappingValueNode:
			if slices.Contains(paths, nodePath(m.Value)) {
				m.Value = ast.Null(m.Value.GetToken())
				return
			}
			walk(m.Value)
		case *ast.SequenceNode:
			for _, item := range m.Values {
				walk(item)
			}
		}
	}
	walk(root)
	return root
}

// rulesReading are the rules that read beyond the entry they report on:
// what they read, by path prefix.
var rulesReading = map[string][]string{
	"V6":  {"proxies["}, // names across proxies
	"V10": {"proxies["}, // every proxy's resolve
	"V26": {"admin.tokens"},
	"V27": {"admin.tokens", "admin.groups", "admin.access", "proxies["},
	"V34": {"admin.public", "admin.access", "proxies["},
	"V36": {"admin.groups", "admin.access", "proxies["},
}

// restsOnFailure reports whether a rule's violation could be caused by a
// failed field left out: it is at, under or beside one (same parent), or
// the rule reads a part of the document where one failed.
func restsOnFailure(v Violation, failed []string) bool {
	for _, f := range failed {
		if v.Path == f || strings.HasPrefix(v.Path, f+".") || strings.HasPrefix(f, v.Path+".") || parent(v.Path) == parent(f) {
			return true
		}
		for _, prefix := range rulesReading[v.Rule] {
			if strings.HasPrefix(f, prefix) {
				return true
			}
		}
		// V19 reads the variables its mock's request declares.
		if m := mockOf(v.Path); v.Rule == "V19" && m != "" && strings.HasPrefix(f, m+".request") {
			return true
		}
	}
	return false
}

// mockOf is the mock a path is under (`proxies[0].mocks[2]`), or "".
func mockOf(path string) string {
	i := strings.Index(path, "mocks[")
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(path[i:], ']')
	if j < 0 {
		return ""
	}
	return path[:i+j+1]
}

func parent(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}
