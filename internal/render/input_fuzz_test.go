package render

import (
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"
)

// FuzzRequestInput feeds a mock what a client controls: the query string,
// the JSON body and a header, extracted into variables and rendered. It
// must never panic; it answers, or fails with a render.Error whose kind
// says why (a body that is not JSON is BodyNotJSON); every header value it
// answers with is a valid one.
//
//	go test ./internal/render -run '^$' -fuzz FuzzRequestInput -fuzztime 2m
func FuzzRequestInput(f *testing.F) {
	m := compileMock(f, `name: extracts
request:
  method: POST
  url: "^/x$"
  headers: {who: X-User}
  query: {page: .page, sort: .sort}
  body: {items: .content.items, id: .id}
response:
  status: 200
  json: '{"who": {{ who | default("") | tojson }}, "page": {{ page | default("1") | tojson }}, "items": {{ items | default([]) | tojson }}, "id": {{ id | default(0) | tojson }}}'
  headers: {X-Page: "{{ page | default('1') }}", X-Sort: "{{ sort | default('') }}"}`)
	for _, s := range []struct{ query, body, header string }{
		{"page=2&sort=asc", `{"content": {"items": [1, 2]}, "id": 7}`, "ana"},
		{"page=%zz&page=3", `{"id": 1e400}`, ""},
		{"sort=%0d%0aX-Evil:%201", `[1, 2]`, "x\r\ny"},
		{";;&&==", `{"content": {"items": {"a": null}}} {"x": 1}`, "é"},
		{"", `{"content": `, "\x00"},
		{"page=" + string(make([]byte, 64)), `"just a string"`, "a b"},
	} {
		f.Add(s.query, []byte(s.body), s.header)
	}
	f.Fuzz(func(t *testing.T, query string, body []byte, header string) {
		in := Input{Submatches: []string{"/x"}, Header: http.Header{"X-User": {header}}, RawQuery: query, Body: body}
		a, err := m.Answer(&in, &sys, nil, "zeta")
		if err != nil {
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("an error that is not a render.Error: %v", err)
			}
			return
		}
		if a.Status != 200 {
			t.Fatalf("status %d", a.Status)
		}
		for _, kv := range a.Headers {
			for i := 0; i < len(kv[1]); i++ {
				if c := kv[1][i]; (c < 0x20 && c != '\t') || c == 0x7f {
					t.Fatalf("header %s holds byte %#x: %q", kv[0], c, kv[1])
				}
			}
		}
		if !utf8.Valid(a.Body) && utf8.Valid(body) && utf8.ValidString(query) && utf8.ValidString(header) {
			t.Fatalf("valid input rendered invalid UTF-8: %q", a.Body)
		}
	})
}
