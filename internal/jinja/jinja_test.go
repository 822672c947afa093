package jinja

import (
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2/exec"
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
	if _, err := tpl.ExecuteToString(exec.NewContext(map[string]any{})); err == nil {
		t.Fatal("an undefined variable rendered without error")
	}
	tpl, _ = Compile("[{{ missing | default('') }}]")
	out, err := tpl.ExecuteToString(exec.NewContext(map[string]any{}))
	if err != nil || out != "[]" {
		t.Fatalf("default('') did not opt out: %q, %v", out, err)
	}
}

func TestTemplatesCannotReadFiles(t *testing.T) {
	for _, src := range []string{`{% include "/etc/hostname" %}`, `{% include "../../go.mod" %}`, `{% extends "/etc/hostname" %}`} {
		tpl, err := Compile(src)
		if err != nil {
			continue // refused at compile time: fine
		}
		out, err := tpl.ExecuteToString(exec.NewContext(map[string]any{}))
		if err == nil {
			t.Errorf("%s rendered %q", src, out)
		}
	}
}
