package jinja

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nikolalohinski/gonja/v2"
)

// big is under MaxOutput: a value a template could make.
var big = strings.Repeat("x", 16_000_000)

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
	vars.Set("big", big)
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
		`{{ range(small * (n | int)) | length }}`,
		`{{ dict(a="x" * n) }}`,
		`{% do items.append("x" * n) %}`,
		`{{ ("<" * 4000000) | forceescape | forceescape }}`,
		// where gonja keeps the expression in an unexported field
		`{% set x = "x" * n %}`,
		`{% with x = "x" * n %}{% endwith %}`,
		`{% filter center(n) %}x{% endfilter %}`,
		`{% filter replace("x", "y" * n) %}x{% endfilter %}`,
		`{% set x = "x" * n if true else "" %}`,
		// values grown on each turn of a loop
		`{% set ns = namespace(s="ab") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`,
		`{% set ns = namespace(s="ab") %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`,
		`{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`,
		`{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}`,
		`{% set ns = namespace(d={}) %}{% for i in range(64) %}{% set ns.d = dict(a=ns.d, b=ns.d) %}{% endfor %}{{ ns.d }}`,
		// turns: nested loops multiply
		`{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}`,
		`{% for a in range(2000) %}{% for b in items %}{% for c in range(1000) %}{% endfor %}{% endfor %}{% endfor %}`,
		// bytes: many large values made, or read whole, each under the bound
		`{% for i in range(100) %}{% set x = "x" * 16000000 %}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{% if big == big %}{% endif %}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{% if "y" in big %}{% endif %}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{{ big[5:6] }}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{{ big[5] }}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{{ big | length }}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{% if big is string %}{% endif %}{% endfor %}`,
		`{% set big = "x" * 16000000 %}{% for i in range(100) %}{{ big.count("y") }}{% endfor %}`,
		`{% set ns = namespace(big="x" * 16000000) %}{% for i in range(100) %}{{ ns.big.startswith("y") }}{% endfor %}`,
		// widths and repetitions taken from the arguments of a format
		`{{ "{:>{w}}".format(s, w=n|int) }}`,
		`{% set f = "{0}" * 2000 %}{{ f.format("x" * 1000000) }}`,
		`{{ ("%[1]s" * 2000) | format("x" * 1000000) }}`,
		// what gonja writes into buffers of its own
		`{% set out %}{% for i in range(100) %}{{ big }}{% endfor %}{% endset %}`,
		`{% filter length %}{% for i in range(100) %}{{ big }}{% endfor %}{% endfilter %}`,
		`{% set out %}{% for i in range(100000) %}` + strings.Repeat("x", 1000) + `{% endfor %}{% endset %}`,
		// results of filters that are not strings
		`{{ [1] | batch(100000, fill_with=big) }}`,
		`{% set l = [1] | batch(100000, fill_with=big) | first %}{{ l | join }}`,
		`{% for i in range(1000) %}{% if [1] | batch(100000, fill_with=1) %}{% endif %}{% endfor %}`,
		// values that hold themselves, or grow in place
		`{% set ns = namespace() %}{% set ns.a = ns %}{{ ns }}`,
		`{% set ns = namespace() %}{% set ns.a = ns %}{% if ns == ns %}{% endif %}`,
		`{% set ns = namespace() %}{% set ns.a = ns %}{{ ns | tojson }}`,
		`{% set d = namespace() %}{% for i in range(8000) %}{% set d[i ~ ""] = big %}{% endfor %}{{ d }}`,
		// string methods and filters that make many items or much text
		`{{ big.replace("x", "y" * 1000, -1) }}`,
		`{% set sep = "x" * 1000000 %}{{ sep.join(range(10000) | map("string") | list) }}`,
		`{{ big.split("x") | length }}`,
		`{{ big | list | length }}`,
		// filters that make a value for every item: charged before they run
		`{{ big | batch(1) | length }}`,
		`{{ big | batch(200) | length }}`,
		`{{ big | slice(200000) | length }}`,
		`{{ big | unique | list | length }}`,
		`{{ ("x" * 1000000) | sort | length }}`,
		`{% set l = "x" * 600000 %}{{ l | batch(10) | map("first") | list | length }}`,
		`{{ ("a " * 100000) | wordwrap(10000000) }}`,
		`{{ range(-9223372036854775807 - 1, 9223372036854775807) }}`,
		// loops over dicts count their turns
		`{% set d = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "j": 10} %}` +
			`{% for a in d %}{% for b in d %}{% for c in d %}{% for e in d %}{% for f in d %}{% for g in d %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}`,
	} {
		began := time.Now()
		out, err := render(t, src)
		if err == nil || !strings.Contains(err.Error(), "bound") {
			t.Errorf("%s: rendered %d bytes, err %v", src, len(out), err)
		}
		if d := time.Since(began); d > 500*time.Millisecond {
			t.Logf("%s: %v", src, d)
		}
	}
}

// The bounds leave ordinary templates as gonja renders them: the
// rewritten `*` multiplies numbers and repeats strings as before.
func TestBoundsKeepOrdinaryResults(t *testing.T) {
	for src, want := range map[string]string{
		`{{ s * 3 }}`:                          "ababab",
		`{{ s * "2" }}`:                        "abab",
		`{{ 3 * s }}`:                          "ababab",
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
		`{{ range(3) | length }}`:              "3",
		`{{ range(10, 0, -3) | list }}`:        "[10, 7, 4, 1]",
		`{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904) | list | length }}`: "4",
		`{% for i in range(3) %}{{ i }}{% if loop.last %}.{% endif %}{% endfor %}`:                    "012.",
		`{% set x = s * 2 %}{{ x }}`:                   "abab",
		`{% with x = s ~ s %}{{ x }}{% endwith %}`:     "abab",
		`{% filter upper %}{{ s * 2 }}{% endfilter %}`: "ABAB",
		`{{ [1, 2] + [3] }}`:                           "[1, 2, 3]",
		`{{ dict(a=1) }}`:                              "{'a': 1}",
		`{% set ns = namespace(s="") %}{% for i in range(3) %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.s }}`: "012",
		`{% set ns = namespace(a=1) %}{% set ns.a = 2 %}{{ ns.a }}`:                                            "2",
		`{% for a in range(200) %}{% for b in range(999) %}{% endfor %}{% endfor %}ok`:                         "ok",
		`{% if s == "ab" and s != "x" and s < "b" %}yes{% endif %}`:                                            "yes",
		`{{ "a" in s }} {{ "z" in items }} {{ s is string }}`:                                                  "True False True",
		`{{ s[0] }}{{ s[1:] }}{{ items[2] }}{{ items[:1] }}`:                                                   "abc['a']",
		`{{ s.upper() }} {{ s.count("a") }} {{ items.copy() | length }}`:                                       "AB 1 3",
		`{% set l = [1] %}{% do l.append(2) %}{{ l }}`:                                                         "[1, 2]",
		`{{ "{:>{w}}".format(s, w=4) }} {{ "%5s" | format(s) }}`:                                               "  ab    ab",
		`{{ "a,b".split(",") }} {{ "-".join(items) }} {{ s.replace("a", "z", -1) }}`:                           "['a', 'b'] a-b-c zb",
	} {
		out, err := render(t, src)
		if err != nil || out != want {
			t.Errorf("%s: %q, %v; want %q", src, out, err, want)
		}
	}
}

// An operand of a checked expression that fails is still reported by
// its name, and the message does not show the checks the user never wrote.
func TestRepetitionErrorsNameTheOperand(t *testing.T) {
	for _, src := range []string{`{{ missing * 2 }}`, `{{ 2 * missing }}`, `{{ s ~ missing }}`, `{% for i in missing %}{% endfor %}`, "{{ missing * \"\\n\" }}"} {
		_, err := render(t, src)
		if err == nil || !strings.Contains(err.Error(), `"missing"`) || strings.Contains(err.Error(), "_doppel_") {
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

// The budget cannot be taken over by a template: a variable of the same
// name hides it, and rendering then stops rather than going unbounded.
func TestBudgetCannotBeReplaced(t *testing.T) {
	for _, src := range []string{
		`{% set _doppel_budget = 1 %}{% for i in range(3) %}{% endfor %}`,
		`{% for _doppel_budget in [1] %}{{ "x" * 2 }}{% endfor %}`,
	} {
		if _, err := render(t, src); err == nil || !strings.Contains(err.Error(), "Doppel's own") {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// A loop that stops early leaves nothing running: range() is a list, not
// gonja's goroutine-fed channel.
func TestStoppedLoopsLeaveNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 200 {
		render(t, `{% for i in range(1000) %}{% if i > 2 %}{% break %}{% endif %}{% endfor %}`)
		render(t, `{% for i in range(1000) %}{{ missing }}{% endfor %}`)
	}
	time.Sleep(50 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Fatalf("goroutines %d before, %d after 400 stopped loops", before, after)
	}
}

// What every request shares cannot be written by one of them: gonja's
// global `gonja` map is not there.
func TestSharedGlobalsCannotBeWritten(t *testing.T) {
	for _, src := range []string{`{% set gonja["k"] = 1 %}`, `{% set gonja.k = 1 %}`, `{{ gonja }}`} {
		if _, err := render(t, src); err == nil {
			t.Errorf("%s rendered", src)
		}
	}
}

// A message quotes what failed, not megabytes of it.
func TestMessagesAreShort(t *testing.T) {
	_, err := render(t, `{{ big.replace() }}`)
	if err == nil || len(err.Error()) > 2<<10 {
		t.Fatalf("%v", err != nil && len(err.Error()) > 2<<10)
	}
}
