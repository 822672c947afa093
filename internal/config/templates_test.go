package config

import (
	"os"
	"testing"

	"github.com/doppelproxy/doppel/internal/jinja"
)

// TestMain gives the rules the template engine, as internal/render does
// in every binary (it cannot be imported here: it imports this package).
func TestMain(m *testing.M) {
	TemplateEngine = func(src string, known func(name string) bool) ([]UnboundVariable, error) {
		tpl, err := jinja.Compile(src)
		if err != nil || known == nil {
			return nil, err
		}
		var out []UnboundVariable
		for _, r := range tpl.Unbound(known) {
			out = append(out, UnboundVariable{Name: r.Name, Line: r.Line, Column: r.Column})
		}
		return out, nil
	}
	os.Exit(m.Run())
}
