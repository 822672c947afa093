package render

import (
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/jinja"
)

// A render the process-wide budget refuses is its own kind of failure, in
// the body or in a header, and a bound of the answer's own is not; either
// way nothing stays reserved.
func TestBudgetRefusalIsItsOwnKind(t *testing.T) {
	old, _ := jinja.Budget()
	jinja.SetBudget(1 << 20)
	t.Cleanup(func() { jinja.SetBudget(old) })
	body := compileMock(t, `
name: mm
request: {method: GET, url: x, query: {n: .n}}
response: {status: 200, body: '{{ "x" * n }}'}
`)
	header := compileMock(t, `
name: mm
request: {method: GET, url: x, query: {n: .n}}
response: {status: 200, body: ok, headers: {X-Big: '{{ "y" * n }}'}}
`)
	for _, c := range []struct {
		m     *Mock
		query string
		want  ErrorKind
	}{
		{body, "n=2000000", BudgetExhausted},
		{header, "n=2000000", BudgetExhausted},
		{body, "n=17000000", RenderFailed}, // over the 16 MiB a value may take
		{body, "n=1000", 0},
		{header, "n=1000", 0},
	} {
		_, err := run(t, c.m, &Input{RawQuery: c.query})
		var kind ErrorKind
		if re, ok := err.(*Error); ok {
			kind = re.Kind
			if kind == BudgetExhausted && !strings.Contains(re.Message, "rendering budget") {
				t.Errorf("%s: the message does not name the budget: %s", c.query, re.Message)
			}
		} else if err != nil {
			t.Fatalf("%s: %v is not a render.Error", c.query, err)
		}
		if kind != c.want {
			t.Errorf("%s: kind %d (%v), want %d", c.query, kind, err, c.want)
		}
		if _, inUse := jinja.Budget(); inUse != 0 {
			t.Errorf("%s: %d bytes of the budget still held after the answer", c.query, inUse)
		}
	}
}
