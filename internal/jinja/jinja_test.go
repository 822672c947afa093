package jinja

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompileReportsSyntaxOnOneLine(t *testing.T) {
	src := "line one\n{{ id }\nline three"
	_, err := Compile(src)
	if err == nil {
		t.Fatal("a broken template compiled")
	}
	if strings.Contains(err.Error(), "line three") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the message echoes the source or spans lines: %q", err)
	}
}

func TestUndefinedIsAnError(t *testing.T) {
	tpl, err := Compile("{{ missing }}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.ExecuteToBytes(NewVars()); err == nil {
		t.Fatal("an undefined variable rendered without error")
	}
	tpl, _ = Compile("[{{ missing | default('') }}]")
	out, err := tpl.ExecuteToBytes(NewVars())
	if err != nil || string(out) != "[]" {
		t.Fatalf("default('') did not opt out: %q, %v", out, err)
	}
}

func TestTemplatesCannotReachOtherTemplatesOrRecurse(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "exists.txt")
	if err := os.WriteFile(existing, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`{% include "/template" %}`,
		`{% include "` + existing + `" %}`,
		`{% extends "/template" %}`,
		`{% import "/template" as t %}`,
		`{% from "/template" import x %}`,
		`{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`,
		`{% call f() %}x{% endcall %}`,
		`{% block b %}x{{ self.b() }}{% endblock %}`,
		`{% set one = [1] %}{% for x in one recursive %}{{ loop(one) }}{% endfor %}`,
	} {
		if _, err := Compile(src); err == nil || !strings.Contains(err.Error(), "is not available in Doppel templates") {
			t.Errorf("%s compiled (%v)", src, err)
		}
	}
}

func TestRenderingFailuresAreErrors(t *testing.T) {
	vars := NewVars()
	vars.Set("a", 1)
	vars.Set("b", 0)
	for _, src := range []string{`{{ a % b }}`, `{{ "x" * 17000000 }}`} {
		tpl, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if _, err := tpl.ExecuteToBytes(vars); err == nil {
			t.Errorf("%s rendered without error", src)
		}
	}
}

func TestTemplatesDoNotLeakIntoEachOther(t *testing.T) {
	setter, _ := Compile(`{% set x = 1 %}{{ x }}`)
	reader, _ := Compile(`{{ x | default("unset") }}`)
	vars := NewVars()
	vars.Set("y", 2)
	if out, err := setter.ExecuteToBytes(vars); err != nil || string(out) != "1" {
		t.Fatalf("%q %v", out, err)
	}
	if out, err := reader.ExecuteToBytes(vars); err != nil || string(out) != "unset" {
		t.Fatalf("a variable set by one template was seen by another: %q %v", out, err)
	}
	// gonja writes what a method returns back to the variable: the
	// appending template sees four items, the next one still three.
	vars.Set("items", []any{1, 2, 3})
	appender, _ := Compile(`{{ items.append(4) }}{{ items | length }}`)
	counter, _ := Compile(`{{ items | length }}`)
	if out, err := appender.ExecuteToBytes(vars); err != nil || string(out) != "4" {
		t.Fatalf("%q %v", out, err)
	}
	if out, err := counter.ExecuteToBytes(vars); err != nil || string(out) != "3" {
		t.Fatalf("a method call of one template changed the variables of another: %q %v", out, err)
	}
	ranged, _ := Compile(`{% for i in range(3) %}{{ i }}{% endfor %}{{ y }}`)
	if out, err := ranged.ExecuteToBytes(vars); err != nil || string(out) != "0122" {
		t.Fatalf("global functions or variables are missing: %q %v", out, err)
	}
}

func TestLengthOfWhatHasNoneFails(t *testing.T) {
	vars := NewVars()
	vars.Set("n", 5)
	vars.Set("s", "abc")
	for src, want := range map[string]string{`{{ 5 | length }}`: "", `{{ n | count }}`: "", `{{ true | length }}`: "", `{{ s | length }}`: "3", `{{ [1, 2] | length }}`: "2"} {
		tpl, err := Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		out, err := tpl.ExecuteToBytes(vars)
		if want == "" && err == nil {
			t.Errorf("%s rendered %q", src, out)
		}
		if want != "" && (err != nil || string(out) != want) {
			t.Errorf("%s = %q, %v; want %q", src, out, err, want)
		}
		if err != nil {
			t.Logf("%s: %v", src, err)
		}
	}
}
