// Package jinja is the one place that knows how Doppel's Jinja2 templates
// are compiled: strict about undefined variables, and unable to read files
// through include, import or extends (a template is one string, never a way
// to reach the disk). The configuration checks templates with it (rule
// V21); rendering executes what it compiles.
package jinja

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

var strict = func() *config.Config {
	c := config.New()
	c.StrictUndefined = true
	return c
}()

// Environment is shared by every template: the standard filters, tests and
// control structures, and no global variables beyond gonja's built-ins.
var Environment = gonja.DefaultEnvironment

// Template is a compiled template.
type Template = exec.Template

const rootName = "/template"

// Compile parses source once; the result is safe to execute concurrently.
func Compile(source string) (*Template, error) {
	loader, err := loaders.NewMemoryLoader(map[string]string{rootName: source})
	if err != nil {
		return nil, err
	}
	t, err := exec.NewTemplate(rootName, strict, loader, Environment)
	if err != nil {
		return nil, fmt.Errorf("%s", Reason(err, source))
	}
	return t, nil
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
