package config

import (
	"math"

	"github.com/goccy/go-yaml/ast"
)

// scalarText returns the text of a scalar node: the unquoted value of a
// string, or the literal spelling of a number or boolean. Names and
// templates accept any scalar, so `name: 42` is the name "42" rather than a
// type error; mappings and sequences are refused by the caller.
func scalarText(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.LiteralNode:
		return n.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	case *ast.AnchorNode:
		return scalarText(n.Value)
	case *ast.TagNode:
		return scalarText(n.Value)
	}
	return "", false
}

// stringValue is scalarText with the refusal every string-typed value gives
// for a mapping or a sequence.
func stringValue(n ast.Node, what string) (string, error) {
	s, ok := scalarText(n)
	if !ok {
		return "", refuse(n, "must be %s, not a %s", what, kindOf(n))
	}
	return s, nil
}

// numberValue reads an integer or float node. Strings are refused: `"0.5"`
// quoted is almost always a templating accident, and the schema says number.
func numberValue(n ast.Node, what string) (float64, error) {
	switch v := unwrap(n).(type) {
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return float64(i), nil
		case uint64:
			return float64(i), nil
		}
	case *ast.FloatNode:
		if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
			break
		}
		return v.Value, nil
	}
	return 0, refuse(n, "must be %s, not %s", what, describe(n))
}

// integerValue reads a whole number; a float with a fractional part is
// refused with a message naming it.
func integerValue(n ast.Node, what string) (int64, error) {
	switch v := unwrap(n).(type) {
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return i, nil
		case uint64:
			if i <= math.MaxInt64 {
				return int64(i), nil
			}
			return math.MaxInt64, nil
		}
	case *ast.FloatNode:
		if v.Value == math.Trunc(v.Value) && math.Abs(v.Value) < 1<<53 {
			return int64(v.Value), nil
		}
		return 0, refuse(n, "must be %s, not the fraction %s", what, v.GetToken().Value)
	}
	return 0, refuse(n, "must be %s, not %s", what, describe(n))
}

func boolValue(n ast.Node) (bool, error) {
	if b, ok := unwrap(n).(*ast.BoolNode); ok {
		return b.Value, nil
	}
	return false, refuse(n, "must be true or false, not %s", describe(n))
}

func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

func kindOf(n ast.Node) string {
	switch unwrap(n).(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "mapping"
	case *ast.SequenceNode:
		return "list"
	}
	return "value"
}

// describe names a node's value for a message: the scalar as written, or
// its kind.
func describe(n ast.Node) string {
	switch v := unwrap(n).(type) {
	case *ast.StringNode:
		return "the string " + quote(v.Value)
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "null"
	}
	if s, ok := scalarText(n); ok {
		return s
	}
	return "this value"
}

func quote(s string) string {
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return "`" + s + "`"
}
