package jinja

import (
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2"
)

func render(t *testing.T, src string) (string, error) {
	t.Helper()
	tpl, err := Compile(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	vars := NewVars()
	vars.Set("n", "99999999999") // as a query parameter arrives: a string gonja reads as an integer
	vars.Set("small", 3)
	vars.Set("s", "ab")
	vars.Set("items", []any{"a", "b", "c"})
	out, err := tpl.ExecuteToBytes(vars)
	return string(out), err
}

// A template that would turn a number into a huge value fails with an
// error naming the bound, before allocating it, wherever the number sits.
func TestSizesAreBoundedBeforeAllocation(t *testing.T) {
	for _, src := range []string{
		`{{ "x" * n }}`,
		`{{ s * n }}`,
		`{{ ("x" * 16000000) * 16000000 }}`,
		`{% if "x" * n %}{% endif %}`,
		`{% for c in "x" * n %}{% endfor %}`,
		`{{ s | center(n) }}`,
		`{{ ("x" * 16000000) | replace("x", "yy") }}`,
		`{{ s | replace("", "x" * 9000000) }}`,
		`{{ "a\nb\nc" | indent(9000000) }}`,
		`{{ items | join("x" * 9000000) }}`,
		`{{ items | batch(n) }}`,
		`{{ items | slice(n) }}`,
		`{{ items | tojson(indent=n) }}`,
		`{{ "%99999999999d" | format(1) }}`,
		`{{ range(n | int) | list }}`,
		`{{ range(0, n | int, 2) | list | length }}`,
		`{{ lipsum(n) }}`,
		`{{ s.center(n) }}`,
		`{{ s.ljust(n) }}`,
		`{{ s.rjust(n) }}`,
		`{{ s.zfill(n) }}`,
		`{{ "\t".expandtabs(n) }}`,
		`{{ "{:>99999999999}".format(s) }}`,
		`{{ range(small * n) | length }}`,
		`{{ dict(a="x" * n) }}`,
		`{% do items.append("x" * n) %}`,
		`{{ ("<" * 4000000) | forceescape | forceescape }}`,
	} {
		out, err := render(t, src)
		if err == nil || !strings.Contains(err.Error(), "bound") {
			t.Errorf("%s: rendered %d bytes, err %v", src, len(out), err)
		}
	}
}

// The bounds leave ordinary templates as gonja renders them: the
// rewritten `*` multiplies numbers and repeats strings as before.
func TestBoundsKeepOrdinaryResults(t *testing.T) {
	for src, want := range map[string]string{
		`{{ s * 3 }}`:                          "ababab",
		`{{ s * "2" }}`:                        "abab",
		`{{ 3 * s }}`:                          "0",
		`{{ small * 2 }}`:                      "6",
		`{{ small * 2.5 }}`:                    "7.5",
		`{{ 2 * 3 * 4 }}`:                      "24",
		`{{ (s * 2) * 2 }}`:                    "abababab",
		`{{ s * -1 }}`:                         "",
		`{% if small * 2 > 5 %}yes{% endif %}`: "yes",
		`{{ range(small * 2) | list }}`:        "[0, 1, 2, 3, 4, 5]",
		`{{ s | center(6) }}`:                  "  ab  ",
		`{{ "a\nb" | indent(2, true) }}`:       "  a\n  b",
		`{{ items | join(", ") }}`:             "a, b, c",
		`{{ "aXa" | replace("a", "bb") }}`:     "bbXbb",
		`{{ items | batch(2) | list }}`:        "[['a', 'b'], ['c']]",
		`{{ "%05d" | format(42) }}`:            "00042",
		`{{ s.rjust(4, "-") }}`:                "--ab",
		`{{ "{:>4}".format(s) }}`:              "  ab",
		`{{ range(100000) | list | length }}`:  "100000",
	} {
		out, err := render(t, src)
		if err != nil || out != want {
			t.Errorf("%s: %q, %v; want %q", src, out, err, want)
		}
	}
}

// An operand of `*` that fails is still reported by its name.
func TestRepetitionErrorsNameTheOperand(t *testing.T) {
	for _, src := range []string{`{{ missing * 2 }}`, `{{ 2 * missing }}`} {
		_, err := render(t, src)
		if err == nil || !strings.Contains(err.Error(), `"missing"`) {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// Every filter and string method of gonja is there, wrapped: the names
// are read from gonja's own sets, so one a later gonja adds is bounded
// too, and none is lost.
func TestEveryFilterAndMethodIsKept(t *testing.T) {
	filters := keys(gonja.DefaultEnvironment.Filters, "filters")
	methods := keys(gonja.DefaultEnvironment.Methods.Str, "methods")
	if len(filters) < 50 || len(methods) < 40 {
		t.Fatalf("read %d filters and %d string methods", len(filters), len(methods))
	}
	for _, name := range filters {
		if !Environment.Filters.Exists(name) {
			t.Errorf("filter %s is lost", name)
		}
	}
	for _, name := range methods {
		if !Environment.Methods.Str.Exists(name) {
			t.Errorf("string method %s is lost", name)
		}
	}
	if _, err := render(t, `{{ "a".format_map({}) }} {{ s.encode() }}`); err != nil {
		t.Error(err)
	}
}
