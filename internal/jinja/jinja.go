// Package jinja is the one place that knows how Doppel's Jinja2 templates
// are compiled: strict about undefined variables; a template is one string,
// never a way to reach the disk or another template (include, import,
// from, extends are not available); no macros, so nothing can recurse
// without bound; a panic while rendering is an error, not a crash; and the
// output is bounded. The configuration checks templates with it (rule
// V21); rendering executes what it compiles.
package jinja

import (
	"fmt"
	"io"
	"regexp"
	"slices"
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

// Environment is shared by every template: the standard filters, tests
// and global functions, with sizes bounded (bounds.go), and every control
// structure except those that reach other templates or define macros.
var Environment = &exec.Environment{
	Context:           boundedGlobals(),
	Filters:           boundedFilters(),
	Tests:             gonja.DefaultEnvironment.Tests,
	ControlStructures: allowedControlStructures(),
	Methods: exec.Methods{
		Bool:  gonja.DefaultEnvironment.Methods.Bool,
		Int:   gonja.DefaultEnvironment.Methods.Int,
		Float: gonja.DefaultEnvironment.Methods.Float,
		Str:   boundedStringMethods(gonja.DefaultEnvironment.Methods.Str),
		Dict:  gonja.DefaultEnvironment.Methods.Dict,
		List:  gonja.DefaultEnvironment.Methods.List,
	},
}

// refused are the control structures a Doppel template may not use.
// `block` is among them: with `self` a block can call itself.
var refused = []string{"include", "import", "from", "extends", "macro", "call", "block"}

func allowedControlStructures() *exec.ControlStructureSet {
	allowed := map[string]parser.ControlStructureParser{}
	for _, name := range []string{"autoescape", "filter", "for", "if", "raw", "set", "with", "do", "break", "continue", "trans"} {
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
	self   bool // the template mentions `self`
	// mutates: the template may change its scope (`set`, or a method
	// call such as `items.append(1)`, which gonja writes back to the
	// variable). Only such a template needs a scope of its own.
	mutates    bool
	multiplies bool // the template holds a `*`
	hint       int  // the capacity a rendering starts with
	source     string
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
	tpl := &Template{t: t, loader: loader, hint: len(source) + len(source)/2 + 16, source: source}
	tpl.names, tpl.mutates, tpl.multiplies = scan(source)
	_, buffers := tpl.names["filter"]
	_, trans := tpl.names["trans"]
	if err := bound(t.Root(), tpl.mutates || buffers || trans); err != nil {
		return nil, err
	}
	if err := unknownNames(tpl); err != nil {
		return nil, err
	}
	_, tpl.self = tpl.names["self"]
	return tpl, nil
}

// scan collects every identifier the template's source holds: variable
// names and, as a harmless surplus, filter, test, keyword and attribute
// names. A variable that is not among them cannot be read by the
// template. It also reports whether the template may change its scope:
// it names `set`, or calls a method (`.name(`); and whether it multiplies.
func scan(source string) (names map[string]struct{}, mutates, multiplies bool) {
	names = map[string]struct{}{}
	var before, last *tokens.Token
	for s := tokens.LexAll(source, strict); !s.End(); s.Next() {
		tok := s.Current()
		switch {
		case tok.Type == tokens.Name:
			names[tok.Val] = struct{}{}
			mutates = mutates || tok.Val == "set"
		case tok.Type == tokens.LeftParenthesis && last != nil && last.Type == tokens.Name && before != nil && before.Type == tokens.Dot:
			mutates = true
		case tok.Type == tokens.Multiply:
			multiplies = true
		}
		before, last = last, tok
	}
	return names, mutates, multiplies
}

// AddNames adds the names the template holds to set.
func (t *Template) AddNames(set map[string]struct{}) {
	for n := range t.names {
		set[n] = struct{}{}
	}
}

// Constant reports whether rendering the template with the same values
// of names always gives the same output, cheaply: it holds no other name
// (no filter, test, function, keyword or variable) and no `*`, which can
// repeat a string to any length.
func (t *Template) Constant(names []string) bool {
	if t.multiplies {
		return false
	}
	for n := range t.names {
		if !slices.Contains(names, n) {
			return false
		}
	}
	return true
}

// Mentions reports whether the template can read a variable called name.
func (t *Template) Mentions(name string) bool {
	_, ok := t.names[name]
	return ok
}

// Vars are the variables one render sees: built once per request and
// shared by every template rendered for it, one template at a time, on top
// of the environment's global functions.
type Vars struct {
	ctx   *exec.Context
	spent budget // by every template rendered with these variables
}

// NewVars starts an empty set of variables, with a fresh budget.
func NewVars() *Vars {
	v := &Vars{ctx: Environment.Context.Inherit()}
	v.ctx.Set(budgetName, &v.spent)
	return v
}

// Set binds name; a later Set of the same name wins.
func (v *Vars) Set(name string, value any) { v.ctx.Set(name, value) }

// Execute renders the template with vars into w. Unlike gonja's own
// Execute, it does not copy the variables for each template: a template
// that may change its scope gets a child scope of vars, so what it sets
// stays its own; any other reads vars as they are.
func (t *Template) Execute(w io.Writer, vars *Vars) error {
	x := t.start(vars)
	x.out.w = w
	return x.run()
}

// ExecuteToBytes renders into a new slice.
func (t *Template) ExecuteToBytes(vars *Vars) ([]byte, error) {
	x := t.start(vars)
	x.buf = make([]byte, 0, t.hint)
	x.out.w = &x.buf
	err := x.run()
	return x.buf, err
}

// ExecuteToString renders into a new string.
func (t *Template) ExecuteToString(vars *Vars) (string, error) {
	x := t.start(vars)
	var b strings.Builder
	b.Grow(t.hint)
	x.out.w = &b
	err := x.run()
	return b.String(), err
}

// execution is everything one rendering needs, allocated together. The
// renderer is built here rather than by gonja's NewRenderer, which would
// copy the configuration (no template can change it: autoescape works on
// a copy of its own) and bind `self` into the scope for every execution;
// `self` is bound only for the templates that mention it.
type execution struct {
	source string // for the messages of errors
	env    exec.Environment
	r      exec.Renderer
	out    bounded
	buf    appender
}

func (t *Template) start(vars *Vars) *execution {
	x := &execution{source: t.source, out: bounded{left: MaxOutput, spent: &vars.spent}}
	scope := vars.ctx
	if t.mutates || t.self {
		scope = scope.Inherit()
	}
	x.env = exec.Environment{
		Context:           scope,
		Filters:           Environment.Filters,
		Tests:             Environment.Tests,
		ControlStructures: Environment.ControlStructures,
		Methods:           Environment.Methods,
	}
	x.r = exec.Renderer{
		Config:      strict,
		Environment: &x.env,
		Loader:      t.loader,
		Template:    t.t,
		RootNode:    t.t.Root(),
		Output:      &x.out,
	}
	if t.self {
		x.env.Context.Set("self", exec.Self(&x.r))
	}
	return x
}

func (x *execution) run() (err error) {
	defer func() {
		// A value the template did not expect (a modulo by zero, say)
		// makes gonja panic: that is this template's error, not Doppel's.
		if v := recover(); v != nil {
			err = fmt.Errorf("unable to execute template: %v", v)
		}
		if err != nil && x.out.spent.refused {
			err = fmt.Errorf("unable to execute template: %w", exhausted())
		}
		x.out.spent.release()
	}()
	if err := x.r.Execute(); err != nil {
		raw := err.Error()
		msg := humane(raw, ownFilters.ReplaceAllString(raw, ""), x.source)
		if len(msg) > maxMessage { // gonja quotes whole values, megabytes of them: keep both ends
			msg = strings.ToValidUTF8(msg[:maxMessage/2], "") + " … " + strings.ToValidUTF8(msg[len(msg)-maxMessage/2:], "")
		}
		return fmt.Errorf("unable to execute template: %s", msg)
	}
	return nil
}

// maxMessage bounds the message of a rendering error.
const maxMessage = 1 << 10

// ownFilters matches how gonja reports a failure inside one of the filters
// the bounds insert (bounds.go): the user never wrote them, so the message
// goes straight to what failed.
var ownFilters = regexp.MustCompile(`(?s)unable to evaluate filter &\{<Token\[\w+\] Val='.*?' Pos=\d+ Line=\d+ Col=\d+> _doppel_\w+ \[.*?\] map\[\]\}: (?:invalid call to filter '_doppel_\w+': )?`)

// bounded refuses to write past its limit, and reserves what it writes of
// the process-wide budget.
type bounded struct {
	w     io.Writer
	left  int
	spent *budget
}

func (b *bounded) Write(p []byte) (int, error) {
	if len(p) > b.left {
		return 0, errTooLong
	}
	if err := b.spent.take(len(p)); err != nil {
		return 0, err
	}
	b.left -= len(p)
	return b.w.Write(p)
}

// WriteString spares gonja's io.WriteString a copy of every piece.
func (b *bounded) WriteString(s string) (int, error) {
	if len(s) > b.left {
		return 0, errTooLong
	}
	if err := b.spent.take(len(s)); err != nil {
		return 0, err
	}
	b.left -= len(s)
	return io.WriteString(b.w, s)
}

var errTooLong = fmt.Errorf("the template rendered more than %d MiB", MaxOutput>>20)

// appender collects output in one growing slice.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

func (a *appender) WriteString(s string) (int, error) {
	*a = append(*a, s...)
	return len(s), nil
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
