// Package jsonbody decodes the JSON body of an admin request, and says
// where it is wrong: the line and column of the first error, for a body
// that is not JSON, ends too soon, or holds a value of the wrong type.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is a body that could not be decoded, at a place in it. Reason
// quotes at most one character of the body, or a number: a body may carry
// credentials.
type Error struct {
	Line, Column int // 1-based; the column counts characters
	Reason       string
	// Syntax is true when the body is not JSON at all (or ends too soon),
	// false when it is JSON of the wrong shape.
	Syntax bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Reason)
}

// UnknownKeyError is a key the value decoded into has no field for. The
// decoder gives no position for it; callers name the key and what is
// allowed there.
type UnknownKeyError struct{ Key string }

func (e *UnknownKeyError) Error() string { return "unknown key " + e.Key }

// Decode reads raw, one JSON value and nothing after it, into v.
func Decode(raw []byte, v any) error { return decode(raw, v, false) }

// DecodeKnown is Decode refusing keys v has no field for.
func DecodeKnown(raw []byte, v any) error { return decode(raw, v, true) }

func decode(raw []byte, v any, known bool) error {
	// The whole body is checked first, so that the first error named is
	// the first in the text, whatever the value decoded into.
	if len(bytes.TrimLeft(raw, " \t\r\n")) == 0 {
		return syntaxAt(raw, len(raw), "the body is empty")
	}
	if err := json.Unmarshal(raw, new(json.RawMessage)); err != nil {
		var syntax *json.SyntaxError
		if !errors.As(err, &syntax) {
			return err
		}
		// encoding/json's own words for a value cut short: there is no
		// other way to tell it from a bad last character.
		if syntax.Error() == "unexpected end of JSON input" {
			return syntaxAt(raw, len(raw), "the body ends before its JSON value does")
		}
		// Offset counts the bytes read, the offending one included.
		return syntaxAt(raw, int(syntax.Offset)-1, syntax.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if known {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return explain(raw, err)
	}
	return nil
}

// explain turns what encoding/json returned for a body of valid JSON into
// a positioned error.
func explain(raw []byte, err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		// Offset is where the value ends; it is the value that is wrong.
		where := "the body"
		if typ.Field != "" {
			where = typ.Field
		}
		if n, ok := strings.CutPrefix(typ.Value, "number "); ok && strings.HasPrefix(typ.Type.Kind().String(), "float") {
			return at(raw, int(typ.Offset)-1, fmt.Sprintf("%s: %s is out of range", where, n))
		}
		return at(raw, int(typ.Offset)-1, fmt.Sprintf("%s must be %s, not %s", where, jsonKind(typ), article(typ.Value)))
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &UnknownKeyError{Key: strings.Trim(key, `"`)}
	}
	return err
}

// at is an Error at byte offset off of raw (clamped to the body).
func at(raw []byte, off int, reason string) *Error {
	off = max(0, min(off, len(raw)))
	start := bytes.LastIndexByte(raw[:off], '\n') + 1
	return &Error{
		Line:   bytes.Count(raw[:start], []byte{'\n'}) + 1,
		Column: utf8.RuneCount(raw[start:off]) + 1,
		Reason: reason,
	}
}

func syntaxAt(raw []byte, off int, reason string) *Error {
	e := at(raw, off, reason)
	e.Syntax = true
	return e
}

// jsonKind names, in JSON's words, what a Go type decodes from.
func jsonKind(e *json.UnmarshalTypeError) string {
	switch e.Type.Kind().String() {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number in range"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "an object"
	}
	return "another type"
}

// article puts "a"/"an" before what the decoder says it found ("number",
// "array", "object", "string", "bool", "number -1").
func article(found string) string {
	switch {
	case found == "array":
		return "a list"
	case found == "bool":
		return "true or false"
	case strings.HasPrefix(found, "number "):
		return "the number " + strings.TrimPrefix(found, "number ")
	case found == "object":
		return "an object"
	}
	return "a " + found
}
