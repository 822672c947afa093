package jinja

import (
	"fmt"
	"slices"
	"testing"
)

func TestUnboundNamesTheVariablesNothingBinds(t *testing.T) {
	known := func(n string) bool { return slices.Contains([]string{"id", "page"}, n) }
	for _, c := range []struct{ src, want string }{
		{`{{ id }} {{ page }}`, `[]`},
		{`{{ idd }}`, `[idd@1:4]`},
		{`{{ who | default('') }} {{ (x | default(1)) + 1 }}`, `[]`},
		{`{% if who is defined %}{{ who }}{% endif %}`, `[]`},
		{`{% if who is undefined %}none{% else %}{{ who.name }}{% endif %}`, `[]`},
		{`{% set total = 2 %}{{ total }}`, `[]`},
		{`{% for k, v in items %}{{ k }}={{ v }} {{ loop.index }}{% endfor %}`, `[items@1:16]`},
		{`{% for i in range(3) %}{{ i }}{% endfor %}{{ lipsum(1) }}`, `[]`},
		{`{% with a = 1 %}{{ a }}{% endwith %}`, `[]`},
		{`{{ user.name }} {{ user.id }} {{ other }}`, `[user@1:4 other@1:34]`},
		{`{{ "x" ~ nme ~ id }}`, `[nme@1:10]`},
		{`{% set ns = namespace(n=0) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}`, `[]`},
		{`{{ id | replace(old, "x") }}`, `[old@1:17]`},
	} {
		tpl, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		var got []string
		for _, r := range tpl.Unbound(known) {
			got = append(got, fmt.Sprintf("%s@%d:%d", r.Name, r.Line, r.Column))
		}
		if s := fmt.Sprint(got); s != c.want && !(c.want == "[]" && len(got) == 0) {
			t.Errorf("%s: %v, want %s", c.src, got, c.want)
		}
	}
}
