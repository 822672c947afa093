package render

import (
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/jinja"
)

// The configuration's rules on templates (V21, V22) are this engine's
// parse: registered here, as image/png registers its decoder with image,
// so that every binary that can render a mock also checks its templates,
// while package config, which the stores import, stays free of the engine.
func init() { config.TemplateEngine = CheckTemplate }

// CheckTemplate is config.TemplateCheck done by the template engine.
func CheckTemplate(src string, known func(name string) bool) ([]config.UnboundVariable, error) {
	tpl, err := jinja.Compile(src)
	if err != nil || known == nil {
		return nil, err
	}
	var out []config.UnboundVariable
	for _, r := range tpl.Unbound(known) {
		out = append(out, config.UnboundVariable{Name: r.Name, Line: r.Line, Column: r.Column})
	}
	return out, nil
}
