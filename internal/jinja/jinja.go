// Package jinja is the one place that knows how Doppel's Jinja2 templates
// are compiled: strict about undefined variables; a template is one string,
// never a way to reach the disk or another template (include, import,
// from, extends are not available); no macros, so nothing can recurse
// without bound; a panic while rendering is an error, not a crash; and the
// output is bounded. The configuration checks templates with it (rule
// V21); rendering executes what it compiles.
package jinja

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

var strict = func() *config.Config {
	c := config.New()
	c.StrictUndefined = true
	return c
}()

// Environment is shared by every template: the standard filters and tests,
// gonja's global functions, and every control structure except those that
// reach other templates or define macros.
var Environment = &exec.Environment{
	Context:           gonja.DefaultEnvironment.Context,
	Filters:           gonja.DefaultEnvironment.Filters,
	Tests:             gonja.DefaultEnvironment.Tests,
	ControlStructures: allowedControlStructures(),
	Methods:           gonja.DefaultEnvironment.Methods,
}

// refused are the control structures a Doppel template may not use.
var refused = []string{"include", "import", "from", "extends", "macro", "call"}

func allowedControlStructures() *exec.ControlStructureSet {
	allowed := map[string]parser.ControlStructureParser{}
	for _, name := range []string{"autoescape", "block", "filter", "for", "if", "raw", "set", "with", "do", "break", "continue", "trans"} {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			allowed[name] = p
		}
	}
	return exec.NewControlStructureSet(allowed)
}

// MaxOutput bounds what one template may render.
const MaxOutput = 16 << 20

// Template is a compiled template; it is safe to execute concurrently.
type Template struct {
	t      *exec.Template
	loader loaders.Loader
	names  map[string]struct{}
}

const rootName = "/template"

// Compile parses source once. A template gonja's parser cannot cope with
// (it panics on some malformed input) is an error, never a crash.
func Compile(source string) (_ *Template, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the template cannot be parsed: %v", v)
		}
	}()
	loader, err := loaders.NewMemoryLoader(map[string]string{rootName: source})
	if err != nil {
		return nil, err
	}
	t, err := exec.NewTemplate(rootName, strict, loader, Environment)
	if err != nil {
		msg := Reason(err, source)
		for _, name := range refused {
			if strings.Contains(msg, `"`+name+`"`) {
				msg = fmt.Sprintf("`%s` is not available in Doppel templates (%s): %s", name, strings.Join(refused, ", "), msg)
				break
			}
		}
		return nil, fmt.Errorf("%s", msg)
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
func (t *Template) Execute(w io.Writer, vars *Vars) (err error) {
	defer func() {
		// A value the template did not expect (a modulo by zero, say)
		// makes gonja panic: that is this template's error, not Doppel's.
		if v := recover(); v != nil {
			err = fmt.Errorf("unable to execute template: %v", v)
		}
	}()
	env := &exec.Environment{
		Context:           vars.ctx.Inherit(),
		Filters:           Environment.Filters,
		Tests:             Environment.Tests,
		ControlStructures: Environment.ControlStructures,
		Methods:           Environment.Methods,
	}
	if err := exec.NewRenderer(env, &bounded{w: w, left: MaxOutput}, strict, t.loader, t.t).Execute(); err != nil {
		return fmt.Errorf("unable to execute template: %w", err)
	}
	return nil
}

// bounded refuses to write past its limit.
type bounded struct {
	w    io.Writer
	left int
}

func (b *bounded) Write(p []byte) (int, error) {
	if len(p) > b.left {
		return 0, fmt.Errorf("the template rendered more than %d MiB", MaxOutput>>20)
	}
	b.left -= len(p)
	return b.w.Write(p)
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
