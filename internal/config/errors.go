package config

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// A Violation is one thing wrong with a document, reported against the
// configuration path that produced it. Rule is the stable rule number
// ("V14") for cross-field rules and empty for what the types refuse.
type Violation struct {
	Path    string
	Rule    string
	Message string
	// Line is the 1-based line in the YAML source, or 0 when unknown: a
	// document that did not come from text, or a rule about a setting that
	// was left out and took its default.
	Line int
}

// String renders the violation the way every command prints it: the path
// first, nothing before it.
func (v Violation) String() string {
	s := v.Message
	if v.Path != "" {
		s = v.Path + ": " + s
	}
	if v.Line > 0 {
		s += fmt.Sprintf(" (line %d)", v.Line)
	}
	return s
}

// Invalid is the error a document fails with: every violation found, in
// document order.
type Invalid struct {
	Violations []Violation
}

func (e *Invalid) Error() string { return strings.Join(e.Lines(), "\n") }

// Lines returns one printable line per violation.
func (e *Invalid) Lines() []string {
	lines := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		lines[i] = v.String()
	}
	return lines
}

// valueError is what a value type refuses a YAML node with. It carries the
// node's path and line so the decoder's first error is already a violation.
type valueError struct {
	v Violation
}

func (e *valueError) Error() string { return e.v.String() }

// refuse builds the error a value type returns for node n.
func refuse(n ast.Node, format string, args ...any) error {
	return &valueError{v: Violation{
		Path:    nodePath(n),
		Message: fmt.Sprintf(format, args...),
		Line:    nodeLine(n),
	}}
}

// nodePath turns goccy's "$.proxies[1].loss" into "proxies[1].loss".
func nodePath(n ast.Node) string {
	if n == nil {
		return ""
	}
	p := n.GetPath()
	p = strings.TrimPrefix(p, "$")
	return strings.TrimPrefix(p, ".")
}

func nodeLine(n ast.Node) int {
	if n == nil || n.GetToken() == nil {
		return 0
	}
	return n.GetToken().Position.Line
}
