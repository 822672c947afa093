// Package jinja is the one place that knows how Doppel's Jinja2 templates
// are compiled: strict about undefined variables, and unable to read files
// through include, import or extends (a template is one string, never a way
// to reach the disk). The configuration checks templates with it (rule
// V21); rendering executes what it compiles.
package jinja

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

var strict = func() *config.Config {
	c := config.New()
	c.StrictUndefined = true
	return c
}()

// Environment is shared by every template: the standard filters, tests and
// control structures, and no global variables beyond gonja's built-ins.
var Environment = gonja.DefaultEnvironment

// Template is a compiled template; it is safe to execute concurrently.
type Template struct {
	t      *exec.Template
	loader loaders.Loader
	names  map[string]struct{}
}

const rootName = "/template"

// Compile parses source once.
func Compile(source string) (*Template, error) {
	loader, err := loaders.NewMemoryLoader(map[string]string{rootName: source})
	if err != nil {
		return nil, err
	}
	t, err := exec.NewTemplate(rootName, strict, loader, Environment)
	if err != nil {
		return nil, fmt.Errorf("%s", Reason(err, source))
	}
	return &Template{t: t, loader: loader, names: names(source)}, nil
}

// names collects every identifier the template's source holds: variable
// names and, as a harmless surplus, filter, test, keyword and attribute
// names. A variable that is not among them cannot be read by the template.
func names(source string) map[string]struct{} {
	out := map[string]struct{}{}
	for s := tokens.LexAll(source, strict); !s.End(); s.Next() {
		if tok := s.Current(); tok.Type == tokens.Name {
			out[tok.Val] = struct{}{}
		}
	}
	return out
}

// AddNames adds the names the template holds to set.
func (t *Template) AddNames(set map[string]struct{}) {
	for n := range t.names {
		set[n] = struct{}{}
	}
}

// Mentions reports whether the template can read a variable called name.
func (t *Template) Mentions(name string) bool {
	_, ok := t.names[name]
	return ok
}

// Vars are the variables one render sees: built once per request and
// shared by every template rendered for it, on top of the environment's
// global functions.
type Vars struct {
	ctx *exec.Context
}

// NewVars starts an empty set of variables.
func NewVars() *Vars { return &Vars{ctx: Environment.Context.Inherit()} }

// Set binds name; a later Set of the same name wins.
func (v *Vars) Set(name string, value any) { v.ctx.Set(name, value) }

// Execute renders the template with vars into w. Unlike gonja's own
// Execute, it does not copy the variables for each template: each
// execution gets a child scope of vars instead, so what a template sets
// stays its own.
func (t *Template) Execute(w io.Writer, vars *Vars) error {
	env := &exec.Environment{
		Context:           vars.ctx.Inherit(),
		Filters:           Environment.Filters,
		Tests:             Environment.Tests,
		ControlStructures: Environment.ControlStructures,
		Methods:           Environment.Methods,
	}
	if err := exec.NewRenderer(env, w, strict, t.loader, t.t).Execute(); err != nil {
		return fmt.Errorf("unable to execute template: %w", err)
	}
	return nil
}

// ExecuteToBytes renders into a new slice.
func (t *Template) ExecuteToBytes(vars *Vars) ([]byte, error) {
	var b bytes.Buffer
	err := t.Execute(&b, vars)
	return b.Bytes(), err
}

var sourceQuote = regexp.MustCompile(`(?s)^failed to parse template '.*?': `)

// Reason strips gonja's echo of the whole template source from an error, so
// that a message stays one readable line.
func Reason(err error, source string) string {
	msg := err.Error()
	msg = strings.Replace(msg, "failed to parse template '"+source+"': ", "", 1)
	msg = sourceQuote.ReplaceAllString(msg, "")
	return strings.Join(strings.Fields(msg), " ")
}
