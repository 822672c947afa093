// Package layout holds the dependency rules between Doppel's packages
// (STYLE.md, "Our layout"), checked on what `go list` reports, so that an
// import that breaks one fails a test rather than waiting for a review.
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/doppelproxy/doppel/"

// pkg is what the rules read of one package: its import path and every
// package it depends on, directly or not, tests left out.
type pkg struct {
	ImportPath string
	Name       string
	Deps       []string
}

// doppels are the packages of this module among p's dependencies, without
// the module's prefix.
func (p pkg) doppels() []string {
	var out []string
	for _, d := range p.Deps {
		if rest, ok := strings.CutPrefix(d, module); ok {
			out = append(out, rest)
		}
	}
	return out
}

func (p pkg) rel() string { return strings.TrimPrefix(p.ImportPath, module) }

// list is every package of the module, as `go list -json` reports it.
func list(t *testing.T) map[string]pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the rules are read with the go command: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Name,Deps", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs[p.rel()] = p
	}
	for _, want := range []string{"internal/config", "internal/store", "internal/store/postgres", "internal/proxy", "cmd/doppel"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("go list does not report %s: the rules would check nothing", want)
		}
	}
	return pkgs
}

// under reports whether rel is dir or inside it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

func TestDependencyRules(t *testing.T) {
	pkgs := list(t)
	// leaves are the helpers a store may import besides config and store:
	// each must import nothing of Doppel's, or the rule would leak.
	leaves := []string{
		// The contracts of what replicas share (sessions, counters, the
		// registry of replicas), which the PostgreSQL store implements.
		"internal/shared",
	}
	for _, l := range leaves {
		if ds := pkgs[l].doppels(); len(ds) > 0 {
			t.Errorf("%s is a leaf a store may import, but it imports %v", l, ds)
		}
	}
	for _, tc := range []struct {
		rule string
		// of: the packages the rule is about.
		of func(rel string) bool
		// may reports whether one of them may depend on dep.
		may func(dep string) bool
	}{{
		rule: "a store imports only config, store and the leaves",
		of:   func(rel string) bool { return under(rel, "internal/store") },
		may: func(dep string) bool {
			return dep == "internal/config" || dep == "internal/store" || slices.Contains(leaves, dep)
		},
	}, {
		rule: "config does not import the template engine (render registers it)",
		of:   func(rel string) bool { return rel == "internal/config" },
		may:  func(dep string) bool { return !under(dep, "internal/jinja") && !under(dep, "internal/render") },
	}, {
		rule: "the proxy imports no store and not the admin API",
		of:   func(rel string) bool { return under(rel, "internal/proxy") },
		may:  func(dep string) bool { return !under(dep, "internal/store") && !under(dep, "internal/admin") },
	}} {
		checked := 0
		for _, rel := range slices.Sorted(maps.Keys(pkgs)) {
			if !tc.of(rel) {
				continue
			}
			checked++
			for _, dep := range pkgs[rel].doppels() {
				if !tc.may(dep) {
					t.Errorf("%s: %s depends on %s", tc.rule, rel, dep)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no package to check", tc.rule)
		}
	}
}

// Config's template rules are only as good as the engine registered with
// them: every program that reads a document links render, which does.
func TestProgramsThatReadDocumentsCheckTemplates(t *testing.T) {
	pkgs := list(t)
	for _, rel := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[rel]
		if p.Name != "main" && rel != "doppeltest" {
			continue
		}
		ds := p.doppels()
		if slices.Contains(ds, "internal/config") && !slices.Contains(ds, "internal/render") {
			t.Errorf("%s reads documents (it depends on internal/config) but does not link internal/render, so their templates would go unchecked", rel)
		}
	}
}
