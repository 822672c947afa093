package jinja

import (
	"testing"
)

// compile is Compile, with a panic returned rather than raised.
func compile(src string) (tpl *Template, panicked any, err error) {
	defer func() { panicked = recover() }()
	tpl, err = Compile(src)
	return tpl, nil, err
}

// FuzzTemplate compiles and renders arbitrary template sources with a few
// variables bound, as a mock's answer does. It must never panic (a panic
// in gonja comes back as an error), never render more than MaxOutput,
// give back all it reserved of the rendering budget, and, whatever sizes
// or loops the source asks for, end (bounds.go).
// Sources over 4 KiB are skipped so that each input stays quick.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"",
		"plain text",
		"{{ id }}",
		"{{ missing }}",
		"{{ missing | default('') }}",
		`{"id": "{{ id }}", "n": {{ n + 1 }}}`,
		"{% for i in items %}{{ i }},{% endfor %}",
		"{% for i in items %}{% if loop.last %}{{ i }}{% endif %}{% endfor %}",
		"{{ items | length }} {{ items | join('-') }} {{ obj.k }} {{ obj['k'] }}",
		"{% set x = n * 2 %}{{ x }}{% with y = 3 %}{{ x + y }}{% endwith %}",
		"{{ n % 0 }}",
		"{{ n / 0 }}",
		`{{ "x" * 17000000 }}`,
		"{{ 'ab' * n }}",
		"{{ range(5) | list }}",
		"{{ id | upper | replace('A', 'b') | truncate(3) }}",
		"{% raw %}{{ id }}{% endraw %}",
		"{% filter upper %}{{ id }}{% endfilter %}",
		"{% if n is divisibleby 3 %}yes{% else %}no{% endif %}",
		"{% include '/template' %}",
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"{{ id }",
		"{% for %}",
		"{{ ((((((((((1)))))))))) }}",
		"{{ [[[[[[[[1]]]]]]]] }}",
		"{{ obj.k.k.k }}",
		"{{ items[10] }}",
		"{{ items[-1] }}",
		"{{ id[1:] }}",
		"{{ none.x }}",
		"{{ 1e308 * 10 }}",
		"{{ 9223372036854775807 + 1 }}",
		"{{ id | int }} {{ id | float }}",
		"{{ obj | tojson }}",
		"{% do items.append(1) %}",
		"{{ '%s' | format(id) }}",
		"{{ id | wordwrap(0) }}",
		"{{ id | center(100000) }}",
		"{{ items | batch(0) }}",
		"{{ items | slice(0) }}",
		"{{ range(0, 10, 0) | list }}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4<<10 {
			t.Skip("over 4 KiB")
		}
		tpl, panicked, err := compile(src)
		if panicked != nil {
			t.Fatalf("Compile(%q) panicked: %v", src, panicked)
		}
		if err != nil {
			return
		}
		vars := NewVars()
		vars.Set("id", "A42")
		vars.Set("n", 3)
		vars.Set("items", []any{"a", 2, 3.5, true, nil})
		vars.Set("obj", map[string]any{"k": "v", "nested": map[string]any{"k": []any{1}}})
		out, err := tpl.ExecuteToBytes(vars)
		if len(out) > MaxOutput {
			t.Fatalf("rendered %d bytes, over MaxOutput (err %v)", len(out), err)
		}
		if _, inUse := Budget(); inUse != 0 {
			t.Fatalf("%d bytes of the rendering budget still held after the render (err %v)", inUse, err)
		}
	})
}
