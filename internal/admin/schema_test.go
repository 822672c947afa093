package admin

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
)

// validate checks value against a JSON Schema (2020-12) of the OpenAPI
// document doc, and returns what does not hold. It knows the keywords the
// document uses and ignores annotations (description, format, examples):
// enough to hold every answer the tests see to what the document says.
func validate(doc map[string]any, schema any, value any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool && !b {
			return []string{at + ": not allowed"}
		}
		return nil
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	if r, ok := s["$ref"].(string); ok {
		errs = append(errs, validate(doc, resolveRef(doc, r), value, at)...)
	}
	for _, sub := range list(s["allOf"]) {
		errs = append(errs, validate(doc, sub, value, at)...)
	}
	if subs := list(s["oneOf"]); subs != nil {
		if n := countValid(doc, subs, value, at); n != 1 {
			fail("matches %d of oneOf, want exactly 1", n)
		}
	}
	if subs := list(s["anyOf"]); subs != nil && countValid(doc, subs, value, at) == 0 {
		fail("matches none of anyOf")
	}
	if c, ok := s["const"]; ok && !reflect.DeepEqual(c, value) {
		fail("%v is not %v", value, c)
	}
	if enum := list(s["enum"]); enum != nil && !containsValue(enum, value) {
		fail("%v is not one of %v", value, enum)
	}
	if t, ok := s["type"].(string); ok && !hasType(value, t) {
		fail("%v (%T) is not of type %s", value, value, t)
		return errs
	}
	switch v := value.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, req := range list(s["required"]) {
			if _, ok := v[req.(string)]; !ok {
				fail("%s is required", req)
			}
		}
		for k, sub := range v {
			if names, ok := s["propertyNames"]; ok {
				errs = append(errs, validate(doc, names, k, at+"."+k+"(name)")...)
			}
			if p, ok := props[k]; ok {
				errs = append(errs, validate(doc, p, sub, at+"."+k)...)
			} else if extra, ok := s["additionalProperties"]; ok {
				errs = append(errs, validate(doc, extra, sub, at+"."+k)...)
			}
		}
	case []any:
		if n, ok := s["minItems"].(float64); ok && float64(len(v)) < n {
			fail("%d items, at least %v", len(v), n)
		}
		if items, ok := s["items"]; ok {
			for i, sub := range v {
				errs = append(errs, validate(doc, items, sub, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case string:
		if p, ok := s["pattern"].(string); ok && !compiled(p).MatchString(v) {
			fail("%q does not match %s", v, p)
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(v))) < n {
			fail("%q is shorter than %v", v, n)
		}
		if n, ok := s["maxLength"].(float64); ok && float64(len([]rune(v))) > n {
			fail("%q is longer than %v", v, n)
		}
	case float64:
		if n, ok := s["minimum"].(float64); ok && v < n {
			fail("%v is under %v", v, n)
		}
		if n, ok := s["maximum"].(float64); ok && v > n {
			fail("%v is over %v", v, n)
		}
	}
	return errs
}

func countValid(doc map[string]any, subs []any, value any, at string) int {
	n := 0
	for _, sub := range subs {
		if len(validate(doc, sub, value, at)) == 0 {
			n++
		}
	}
	return n
}

func resolveRef(doc map[string]any, ref string) any {
	var cur any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	if cur == nil {
		panic("the document refers to " + ref + ", which it does not hold")
	}
	return cur
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func containsValue(values []any, v any) bool {
	for _, x := range values {
		if reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "null":
		return v == nil
	}
	return false
}

var patterns sync.Map // string -> *regexp.Regexp

// compiled reads an ECMA-262 pattern as RE2: only \uXXXX differs among
// the patterns the configuration uses.
func compiled(p string) *regexp.Regexp {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(regexp.MustCompile(`\\u([0-9a-fA-F]{4})`).ReplaceAllString(p, `\x{$1}`))
	patterns.Store(p, re)
	return re
}
