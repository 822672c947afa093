package jinja

import (
	"strings"
	"testing"
)

// TestRenderErrorsSayWhereAndWhy: a rendering error names the line, the
// column when gonja knows it, the tag that failed and why, in one line,
// and none of gonja's names for its own structures.
func TestRenderErrorsSayWhereAndWhy(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{% if id.x.y %}a{% endif %}`, "line 1, column 7, in `{% if id.x.y %}`: unable to evaluate id.x: attribute 'x' not found"},
		{`{{ missing }}`, "line 1, in `{{ missing }}`: unable to evaluate name \"missing\""},
		{`{{ id.upper(1,2,3) }}`, "line 1, column 12, in `{{ id.upper(1,2,3) }}`: invalid call to method 'upper' of abc: received 3 unexpected positional arguments"},
		{`{{ range }}`, "line 1, column 4, in `{{ range }}`: a function is written as a value: call it, with ()"},
		{`{{ lipsum }}`, "line 1, column 4, in `{{ lipsum }}`: a function is written as a value"},
		{`{% set f = range %}{{ f }}`, "line 1, column 23, in `{{ f }}`: a function is written as a value"},
		{"a\n{{ id }} {{ id.q.r }}", "line 2, column 17, in `{{ id.q.r }}`: unable to evaluate id.q: attribute 'q' not found"},
		{`{% for i in range(2) %}{{ i.x.y }}{% endfor %}`, "line 1, column 24, in `{{ i.x.y }}`: unable to evaluate i.x"},
		// where a filter the bounds insert fails, gonja's position of it
		{`{{ id }}{{ 2 ** 64 }}`, "line 1, column 14, in `{{ 2 ** 64 }}`: `**` would give an integer beyond"},
		{`{{ id | float }}{{ "nan" | float }}`, "line 1, column 28, in `{{ \"nan\" | float }}`: filter `float`: invalid call to filter 'float': the result is NaN, which is not a number"},
	} {
		tpl, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		v := NewVars()
		v.Set("id", "abc")
		_, err = tpl.ExecuteToString(v)
		if err == nil {
			t.Fatalf("%s rendered", c.src)
		}
		msg := strings.TrimPrefix(err.Error(), "unable to execute template: ")
		if !strings.HasPrefix(msg, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.src, msg, c.want)
		}
		for _, internal := range []string{"ControlStructure", "filtered_expression", "call(", "Token[", "Line=", "func("} {
			if strings.Contains(msg, internal) {
				t.Errorf("%s: the message shows the engine's %q: %s", c.src, internal, msg)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: more than one line: %q", c.src, msg)
		}
	}
	// Functions are fine where they are called, or are not functions.
	for _, src := range []string{`{{ range(3) }}`, `{{ id.upper() }}`, `{{ id }}`} {
		tpl, _ := Compile(src)
		v := NewVars()
		v.Set("id", "abc")
		if _, err := tpl.ExecuteToString(v); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

func TestUnknownFiltersAndTestsAreCompileErrors(t *testing.T) {
	for src, want := range map[string]string{
		`{{ id | nosuch }}`:                      "line 1, column 9: there is no filter `nosuch`",
		`{% if id is nosuchtest %}{% endif %}`:   "line 1, column 13: there is no test `nosuchtest`",
		`{% filter nosuch %}x{% endfilter %}`:    "there is no filter `nosuch`",
		"{{ id }}\n{{ id | upper | lowr }}":      "line 2, column 17: there is no filter `lowr`",
		`{{ id | default('') | tojson | trim }}`: "",
	} {
		_, err := Compile(src)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %s", src, err, want)
		}
	}
}
