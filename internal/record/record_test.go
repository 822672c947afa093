package record

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jinja"
	"github.com/doppelproxy/doppel/internal/journal"
)

// rendered is what the template Verbatim makes of s renders to.
func rendered(t testing.TB, s string) (string, error) {
	tpl, err := jinja.Compile(Verbatim(s))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = tpl.Execute(&b, jinja.NewVars())
	return b.String(), err
}

func TestVerbatimRendersItsText(t *testing.T) {
	for _, s := range []string{
		"", "plain", "{", "}", "{}", "{{ x }}", "{% if y %}no{% endif %}", "{# c #}", "{{{", "{%%}", "a{{b}}c{%d%}e{#f#}",
		`{"json": {"nested": {}}}`, "{% raw %}tail{% endraw %}", "{{ '}}' }}", "ends with {", "a\n", "a\r\n", "\r", "a\rb", "a\n\n", "\n", "{\n",
	} {
		got, err := rendered(t, s)
		if err != nil || got != s {
			t.Errorf("%q renders %q (%v)", s, got, err)
		}
	}
}

// FuzzVerbatim: any UTF-8 text, through Verbatim and the renderer the mocks
// use, comes back as it was.
func FuzzVerbatim(f *testing.F) {
	for _, s := range []string{"{{ x }}", "{%", "{#", "{{{", `{"a": "{{"}`, "é{%-x-%}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 4096 {
			return
		}
		got, err := rendered(t, s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got != s {
			t.Fatalf("%q renders %q", s, got)
		}
	})
}

// FuzzBytes: any bytes, through Bytes and the renderer, come back as they
// were.
func FuzzBytes(f *testing.F) {
	for _, s := range []string{"\x89PNG\r\n\x1a\n\x00", `"\`, "{{ x }}", "\xff\xfe", "é"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		tpl, err := jinja.Compile(Bytes(b))
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		var out strings.Builder
		if err := tpl.Execute(&out, jinja.NewVars()); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if out.String() != string(b) {
			t.Fatalf("%q renders %q", b, out.String())
		}
	})
}

// TestEveryRecordedMockHasItsLatency: each recorded mock carries the
// span the upstream took, in seconds to the tenth of a millisecond, an
// answer within a millisecond included (at least 0.0001 s); the mocks
// load as a proxy's, and keep those values through the canonical form.
func TestEveryRecordedMockHasItsLatency(t *testing.T) {
	exchange := func(path string, upstreamMS float64) *journal.Entry {
		return &journal.Entry{ID: path, Method: "GET", Path: path, Status: 200, ResponseBody: journal.Body("ok"), UpstreamMS: &upstreamMS}
	}
	res, err := Mocks([]*journal.Entry{
		exchange("/instant", 0.004), exchange("/quick", 0.35), exchange("/quick", 0.61), exchange("/slow", 42.04),
	}, Limits{Bodies: 4096, BodyLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{"rec-get-instant": {0.0001, 0.0001}, "rec-get-quick": {0.0004, 0.0006}, "rec-get-slow": {0.042, 0.042}}
	if len(res.Mocks) != len(want) {
		t.Fatalf("%d mocks: %v", len(res.Mocks), res.Mocks)
	}
	for _, m := range res.Mocks {
		l, _ := m["proxy"].(map[string]any)["latency"].(map[string]any)
		w := want[m["name"].(string)]
		if l == nil || l["percentage"] != 1 || l["min"] != w[0] || l["max"] != w[1] {
			t.Errorf("%s: latency %v, want min %v max %v", m["name"], l, w[0], w[1])
		}
	}

	raw, _ := json.Marshal(map[string]any{"name": "shop", "type": "http", "url": "http://127.0.0.1:9/", "mocks": res.Mocks})
	p, err := config.ParseProxy(raw)
	if err != nil {
		t.Fatalf("the recorded mocks do not load: %v", err)
	}
	canonical, err := config.CanonicalProxy(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.ParseProxy(canonical)
	if err != nil {
		t.Fatalf("the canonical form does not load: %v\n%s", err, canonical)
	}
	for _, m := range again.Mocks {
		w := want[string(m.Name)]
		if m.Proxy == nil || m.Proxy.Latency == nil || float64(m.Proxy.Latency.Min) != w[0] || float64(m.Proxy.Latency.Max) != w[1] {
			t.Errorf("%s after the canonical form: %+v, want min %v max %v", m.Name, m.Proxy, w[0], w[1])
		}
	}
	if !strings.Contains(string(canonical), "min: 0.0001\n") {
		t.Errorf("the canonical form writes the least latency otherwise:\n%s", canonical)
	}
	r1, _ := config.ProxyRevision(p)
	r2, _ := config.ProxyRevision(again)
	if r1 != r2 {
		t.Errorf("the revision moved through the canonical form: %s, %s", r1, r2)
	}
}
