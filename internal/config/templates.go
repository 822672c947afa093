package config

// A TemplateCheck parses src, an inline Jinja2 template, for V21 and V22:
// err says why it does not parse; else, when known is not nil, unbound
// lists the variables it reads that nothing binds (known says what Doppel
// and the request bind), in the order they are first read.
type TemplateCheck func(src string, known func(name string) bool) (unbound []UnboundVariable, err error)

// An UnboundVariable is a variable a template reads that nothing binds,
// and where it is first read.
type UnboundVariable struct {
	Name         string
	Line, Column int
}

// TemplateEngine checks the inline templates of every document, proxy and
// session this package parses or validates. The template engine's package
// sets it when it is initialised (internal/render, which every binary that
// serves or checks a document links), so that this package, which every
// store imports, does not import the engine. Nil leaves templates
// unchecked: V21 and V22 then say nothing.
var TemplateEngine TemplateCheck
