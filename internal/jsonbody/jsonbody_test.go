package jsonbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type shape struct {
	Name  string         `json:"name"`
	Count int            `json:"count"`
	Tags  map[string]int `json:"tags"`
}

func TestDecodeSaysWhere(t *testing.T) {
	for _, c := range []struct {
		body         string
		line, column int
		syntax       bool
		reason       string
	}{
		{`{"name": "x" "count": 1}`, 1, 14, true, `invalid character '"' after object key:value pair`},
		{"{\n  \"name\": \"x\",\n  \"count\": tru\n}", 3, 15, true, "invalid character '\\n' in literal true (expecting 'e')"},
		{"{\n  \"name\": \"x\",\n  \"count\": 1,\n", 4, 1, true, "the body ends before its JSON value does"},
		{"{\"name\": \"caf\u00e9\", \"count\": 1 x}", 1, 29, true, "invalid character 'x' after object key:value pair"},
		{"", 1, 1, true, "the body is empty"},
		{`{"name": "x"}}`, 1, 14, true, "invalid character '}' after top-level value"},
		{`{"count": tru}`, 1, 14, true, "invalid character '}' in literal true"},
		{" \n ", 2, 2, true, "the body is empty"},
		{`{"name": "x"} {}`, 1, 15, true, "invalid character '{' after top-level value"},
		{"{\n  \"count\": \"seven\"\n}", 2, 18, false, "count must be a whole number in range, not a string"},
		{`{"tags": {"a": true}}`, 1, 19, false, "tags must be a whole number in range, not true or false"},
		{`[1, 2]`, 1, 1, false, "the body must be an object, not a list"},
		{`{"name": 5}`, 1, 10, false, "name must be a string, not a number"},
		{`{"count": 1.5}`, 1, 13, false, "count must be a whole number in range, not the number 1.5"},
	} {
		var v shape
		err := Decode([]byte(c.body), &v)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v, want a positioned error", c.body, err)
			continue
		}
		if e.Line != c.line || e.Column != c.column || e.Syntax != c.syntax || !strings.Contains(e.Reason, c.reason) {
			t.Errorf("%q: line %d, column %d, syntax %v: %q; want line %d, column %d, syntax %v: %q",
				c.body, e.Line, e.Column, e.Syntax, e.Reason, c.line, c.column, c.syntax, c.reason)
		}
		if want := fmt.Sprintf("line %d, column %d: ", e.Line, e.Column); !strings.HasPrefix(e.Error(), want) {
			t.Errorf("%q: %q does not start with %q", c.body, e.Error(), want)
		}
	}
}

func TestDecodeKnownNamesTheKey(t *testing.T) {
	var v shape
	if err := Decode([]byte(`{"name": "x", "other": 1}`), &v); err != nil || v.Name != "x" {
		t.Errorf("Decode refused an extra key: %v", err)
	}
	err := DecodeKnown([]byte(`{"name": "x", "other": 1}`), &v)
	var u *UnknownKeyError
	if !errors.As(err, &u) || u.Key != "other" {
		t.Errorf("DecodeKnown: %v, want the unknown key other", err)
	}
	if err := DecodeKnown([]byte(`{"name": "y", "count": 2, "tags": {"a": 1}}`), &v); err != nil || v.Count != 2 || v.Tags["a"] != 1 {
		t.Errorf("DecodeKnown: %v %+v", err, v)
	}
}

// FuzzDecode: whatever the body, an error is positioned inside it (or just
// past its end), and a body encoding/json takes is taken.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"name": "x" "count": 1}`, "{\n\"tags\": {\"a\": \"b\"}}", `[`, ``, "\xff", `{"name": "\u00e9"} 1`, `1e999`, `{"count": -1.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v shape
		err := Decode(body, &v)
		var e *Error
		if errors.As(err, &e) {
			lines := strings.Count(string(body), "\n") + 1
			if e.Line < 1 || e.Line > lines || e.Column < 1 || e.Column > len(body)+1 {
				t.Fatalf("%q: line %d, column %d is outside the body", body, e.Line, e.Column)
			}
		}
		var anything any
		switch err := Decode(body, &anything); {
		case json.Valid(body) && json.Unmarshal(body, &anything) == nil:
			if err != nil {
				t.Fatalf("%q is JSON, refused: %v", body, err)
			}
		case !json.Valid(body):
			if !errors.As(err, &e) || !e.Syntax {
				t.Fatalf("%q is not JSON, not a syntax error: %v", body, err)
			}
		}
	})
}
