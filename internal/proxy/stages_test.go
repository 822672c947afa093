package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/fault"
)

// shout is an On fault of the test's: it upper-cases what the answer writes.
type shout struct{}

func (shout) Name() string                { return "shout" }
func (shout) Stage() fault.Stage          { return fault.On }
func (shout) Roll() (fault.Roll, float64) { return 200, 1 }
func (shout) Act(x fault.Exchange, _ fault.Draw) {
	x.Wrap(func(w http.ResponseWriter) http.ResponseWriter { return shouting{w} })
}

type shouting struct{ http.ResponseWriter }

func (s shouting) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s shouting) Write(b []byte) (int, error) {
	return s.ResponseWriter.Write([]byte(strings.ToUpper(string(b))))
}

// TestThePipelineCallsEveryStage: the handler knows stages, not faults. A
// fault it has never heard of, acting on the answer, shapes both a
// forwarded and a mocked answer, and a Before fault ahead of it stops it.
func TestThePipelineCallsEveryStage(t *testing.T) {
	up := echo(t)
	d := start(t, oneProxy(up.URL, `mocks:
  - name: hello
    request: {method: GET, url: "^/hello$"}
    response: {status: 200, body: "hello there"}
`), nil)
	p := d.holder.Load().Proxies[0]
	p.Faults = fault.Set{shout{}}
	p.Mocks[0].Faults = fault.Set{shout{}}

	if _, body := get(t, d.URL+"/hello", nil); string(body) != "HELLO THERE" {
		t.Errorf("mocked answer: %q", body)
	}
	if _, body := get(t, d.URL+"/echo", nil); !strings.Contains(string(body), `"METHOD":"GET"`) {
		t.Errorf("forwarded answer: %q", body)
	}
	lines := d.logs.lines(t, 2)
	if len(lines) != 2 || lines[0]["loss_injected"] != false {
		t.Fatalf("log lines: %v", lines)
	}

	p.Faults = fault.Set{&fault.Loss{Percentage: 1, Status: 429}, shout{}}
	res, body := get(t, d.URL+"/echo", nil)
	envelope(t, res, body, 429, "LOSS_INJECTED")
	if strings.Contains(string(body), "REQUEST DROPPED") {
		t.Errorf("a fault after the one that answered acted: %s", body)
	}
}
