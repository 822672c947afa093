package render

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/version"
)

// compileMock loads one mock through the real configuration loader.
func compileMock(t testing.TB, mock string) *Mock {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(mock), "\n")
	for i := range lines {
		lines[i] = "      " + lines[i]
	}
	lines[0] = "    - " + strings.TrimSpace(lines[0])
	src := "server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081}\n" +
		"proxies:\n  - name: zeta\n    type: http\n    url: http://h\n    mocks:\n" + strings.Join(lines, "\n") + "\n"
	doc, err := config.Load([]byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	m, err := Compile("zeta", &doc.Proxies[0].Mocks[0])
	if err != nil {
		t.Fatal(err)
	}
	patterns[m] = doc.Proxies[0].Mocks[0].Request.URL.Regexp()
	return m
}

var patterns = map[*Mock]*regexp.Regexp{}

var sys = Request{RequestID: "rid", Path: "/p", Host: "h", PeerIP: "10.0.0.1", RealIP: "10.0.0.2"}

func run(t *testing.T, m *Mock, in *Input) (*Answer, error) {
	t.Helper()
	return m.Answer(in, &sys, nil, "zeta")
}

func TestVariables(t *testing.T) {
	m := compileMock(t, `
name: mm
request:
  method: POST
  url: "^/users/(?P<user>[a-z]+)/(?P<item>[0-9]+)$"
  headers: {who: X-User, absent: X-Absent}
  query: {page: .page, nested: .a.b, none: .none}
  body: {items: .content.items, count: .content.count, name: .name, deep: .content.missing.key, flag: .flag}
response:
  status: 200
  body: "{{ user }} {{ item }} {{ who }} {{ page }} {{ nested }} {{ items | length }} {% for i in items %}[{{ i }}]{% endfor %} {{ count + 1 }} {{ name }} {{ flag }} {{ absent | default('-') }} {{ deep | default('-') }} {{ none | default('-') }}"
`)
	sub := m.groupsMatch(t, "/users/ann/42")
	a, err := run(t, m, &Input{
		Submatches: sub,
		Header:     map[string][]string{"X-User": {"first", "second"}},
		RawQuery:   "page=3&page=4&a.b=dot",
		Body:       []byte(`{"content": {"items": ["x", "y"], "count": 41}, "name": "Zoë", "flag": true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "ann 42 first 3 dot 2 [x][y] 42 Zoë True - - -"
	if string(a.Body) != want {
		t.Fatalf("rendered %q\nwant     %q", a.Body, want)
	}
}

func (m *Mock) groupsMatch(t *testing.T, path string) []string {
	t.Helper()
	return patterns[m].FindStringSubmatch(path)
}

func TestSystemVariablesWinAndAreAlwaysDefined(t *testing.T) {
	m := compileMock(t, `
name: mm
request:
  method: GET
  url: "(?P<method>.*)"
  headers: {path: X-Path}
response:
  status: 200
  body: "{{ proxy_name }}|{{ mock_name }}|{{ doppel_version }}|{{ request_id }}|{{ method }}|{{ path }}|{{ host }}|{{ peer_ip }}|{{ real_ip }}"
`)
	a, err := run(t, m, &Input{Submatches: []string{"x", "CAPTURED"}, Header: map[string][]string{"X-Path": {"EXTRACTED"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "zeta|mm|" + version.Version + "|rid|GET|/p|h|10.0.0.1|10.0.0.2"; string(a.Body) != want {
		t.Fatalf("rendered %q, want %q", a.Body, want)
	}
	empty := Request{}
	if _, err := m.Answer(&Input{}, &empty, nil, "zeta"); err != nil {
		t.Fatalf("empty system variables must still be defined: %v", err)
	}
}

func TestStrictRendering(t *testing.T) {
	m := compileMock(t, `
name: mm
request: {method: GET, url: x, headers: {rid: X-Rid}}
response: {status: 200, json: '{"seen": "{{ rid }}"}'}
`)
	_, err := run(t, m, &Input{})
	re, ok := err.(*Error)
	if !ok || re.Kind != RenderFailed || !strings.Contains(re.Message, "rid") {
		t.Fatalf("an undefined variable gave %v, want a render error naming rid", err)
	}
	m = compileMock(t, `
name: mm
request: {method: GET, url: x, headers: {rid: X-Rid}}
response: {status: 200, json: '{"seen": "{{ rid | default('''') }}"}'}
`)
	if a, err := run(t, m, &Input{}); err != nil || string(a.Body) != `{"seen": ""}` {
		t.Fatalf("default('') did not opt out: %v %s", err, a.Body)
	}
}

func TestJSONIsCheckedButSentAsRendered(t *testing.T) {
	m := compileMock(t, `
name: mm
request: {method: GET, url: x}
response: {status: 201, json: "{ \"b\" : 1,\n  \"a\": [ 2 ] }"}
`)
	a, err := run(t, m, &Input{})
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Body) != "{ \"b\" : 1,\n  \"a\": [ 2 ] }" || a.Status != 201 {
		t.Fatalf("the JSON was re-encoded: %q", a.Body)
	}
	if a.Headers[0] != [2]string{"Content-Type", "application/json"} {
		t.Fatalf("headers %v", a.Headers)
	}
	bad := compileMock(t, `
name: mm
request: {method: GET, url: x}
response: {status: 200, json: "{oops}"}
`)
	if _, err := run(t, bad, &Input{}); err == nil || err.(*Error).Kind != RenderFailed || !strings.Contains(err.(*Error).Message, "its output is not valid json") {
		t.Fatalf("invalid JSON was sent, or refused in other words than 1.1's: %v", err)
	}
}

func TestContentTypesAndHeaderTemplates(t *testing.T) {
	cases := []struct{ mock, want string }{
		{"response: {status: 200, body: hi}", "text/plain; charset=utf-8"},
		{"response: {status: 200, json: '{}'}", "application/json"},
		{"response: {status: 200, body: hi, headers: {content-type: 'text/html; v={{ method }}'}}", "text/html; v=GET"},
	}
	for _, c := range cases {
		m := compileMock(t, "name: mm\nrequest: {method: GET, url: x}\n"+c.mock)
		a, err := run(t, m, &Input{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Headers[0] != [2]string{"Content-Type", c.want} {
			t.Errorf("%s: headers %v, want Content-Type %q", c.mock, a.Headers, c.want)
		}
	}
	m := compileMock(t, "name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 204, headers: {X-Id: 'id-{{ request_id }}'}}")
	a, err := run(t, m, &Input{})
	if err != nil || len(a.Headers) != 1 || a.Headers[0] != [2]string{"X-Id", "id-rid"} || a.Body != nil {
		t.Fatalf("a 204 with a header template: %v %+v", err, a)
	}
	m = compileMock(t, "name: mm\nrequest: {method: GET, url: x, headers: {v: X-V}}\nresponse: {status: 200, headers: {X-Id: '{{ v }}'}}")
	for _, bad := range []string{"a\nInjected: 1", "a\x00b", "a\x7fb", "caf\xc3\xa9"} {
		if _, err := run(t, m, &Input{Header: map[string][]string{"X-V": {bad}}}); err == nil {
			t.Errorf("a header rendered as %q was sent", bad)
		}
	}
}

func TestBodyMustBeJSON(t *testing.T) {
	m := compileMock(t, "name: mm\nrequest: {method: POST, url: x, body: {v: .a}}\nresponse: {status: 200, body: '{{ v | default(0) }}'}")
	for _, body := range []string{"not json", `{"a": 1} {"b": 2}`, " "} {
		if _, err := run(t, m, &Input{Body: []byte(body)}); err == nil || err.(*Error).Kind != BodyNotJSON {
			t.Errorf("body %q: %v, want BodyNotJSON", body, err)
		}
	}
	if a, err := run(t, m, &Input{}); err != nil || string(a.Body) != "0" {
		t.Fatalf("an empty body binds nothing, as in 1.1: %v %s", err, a.Body)
	}
	if a, err := run(t, m, &Input{Body: []byte(`[1, 2]`)}); err != nil || string(a.Body) != "0" {
		t.Fatalf("an array body with an object selector should bind nothing: %v %s", err, a.Body)
	}
}

func TestTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	files := NewFiles(dir)
	m := compileMock(t, "name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200, template: order.json.j2}")
	answer := func() (*Answer, error) { return m.Answer(&Input{}, &sys, files, "zeta") }
	if _, err := answer(); err == nil || err.(*Error).Kind != TemplateMissing {
		t.Fatalf("a missing file gave %v, want TemplateMissing", err)
	}
	path := filepath.Join(dir, "zeta", "order.json.j2")
	write := func(s string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"by": "{{ mock_name }}"}`)
	a, err := answer()
	if err != nil || string(a.Body) != `{"by": "mm"}` || a.Headers[0][1] != "application/json" {
		t.Fatalf("%v %s %v", err, a.Body, a.Headers)
	}
	first, _ := files.Template("zeta", "order.json.j2")
	again, _ := files.Template("zeta", "order.json.j2")
	if first != again {
		t.Fatal("an unchanged file was compiled again")
	}
	time.Sleep(10 * time.Millisecond)
	write(`{"by": "{{ proxy_name }}", "v": 2}`)
	if a, err := answer(); err != nil || string(a.Body) != `{"by": "zeta", "v": 2}` {
		t.Fatalf("a changed file was not picked up: %v %s", err, a.Body)
	}
	// A link out of the directory is not followed.
	outside := filepath.Join(t.TempDir(), "secret")
	_ = os.WriteFile(outside, []byte("secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "zeta", "leak.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := files.Template("zeta", "leak.txt"); err == nil {
		t.Fatal("a symbolic link out of the template directory was followed")
	}
	// Templates cannot include files either.
	write(`{% include "/etc/hostname" %}`)
	if _, err := answer(); err == nil {
		t.Fatal("a template file included a file from the disk")
	}
}

func TestContentTypeOfFiles(t *testing.T) {
	cases := map[string]string{
		"order.json.j2": "application/json",
		"page.html":     "text/html; charset=utf-8",
		"data.xml.tmpl": "text/xml; charset=utf-8",
		"plain":         "text/plain; charset=utf-8",
	}
	for file, want := range cases {
		if got := contentTypeOf(file); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
}

// go test ./internal/render -run '^$' -bench . -benchmem
func BenchmarkAnswer(b *testing.B) {
	m := compileMock(b, `
name: mm
request: {method: GET, url: "^/products/(?P<id>[0-9]+)$", headers: {who: X-User}, query: {page: .page}}
response:
  status: 200
  json: '{"id": {{ id }}, "page": "{{ page | default("1") }}", "who": "{{ who }}"}'
  headers: {X-Served-By: "mock {{ mock_name }}"}
`)
	in := &Input{Submatches: patterns[m].FindStringSubmatch("/products/42"), Header: map[string][]string{"X-User": {"ann"}}, RawQuery: "page=2"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Answer(in, &sys, nil, "zeta"); err != nil {
			b.Fatal(err)
		}
	}
}

// A template that reads only the variables that are the same for every
// request of a mock is rendered once, at load, and answers as if it were
// rendered each time; one that calls a filter, reads a per-request
// variable or repeats a string (which may cost anything) is not.
func TestConstantTemplatesAreRenderedAtLoad(t *testing.T) {
	m := compileMock(t, `name: mm
request: {method: PUT, url: x}
response:
  status: 200
  body: '{{ proxy_name }}/{{ mock_name }} {{ method ~ "!" }} {{ doppel_version }}'
  headers: {X-A: 'mock {{ mock_name }}', X-B: '{{ mock_name | upper }}', X-C: '{{ path }}', X-D: '{{ mock_name * 2 }}'}`)
	if m.inline.tpl != nil || m.headers[0].tpl.tpl != nil {
		t.Error("a template of constants is executed per request")
	}
	if m.headers[1].tpl.tpl == nil || m.headers[2].tpl.tpl == nil || m.headers[3].tpl.tpl == nil {
		t.Error("a template with a filter, a per-request variable or a repetition was rendered at load")
	}
	a, err := run(t, m, &Input{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "zeta/mm PUT! " + version.Version; string(a.Body) != want {
		t.Errorf("body %q, want %q", a.Body, want)
	}
	want := [][2]string{{"Content-Type", "text/plain; charset=utf-8"}, {"X-A", "mock mm"}, {"X-B", "MM"}, {"X-C", "/p"}, {"X-D", "mmmm"}}
	if !slices.Equal(a.Headers, want) {
		t.Errorf("headers %v, want %v", a.Headers, want)
	}
}
