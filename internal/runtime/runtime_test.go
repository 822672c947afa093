package runtime

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
)

const head = "server: {host: 127.0.0.1, port: 8080}\nadmin: {host: 127.0.0.1, port: 8081}\n"

func compile(t *testing.T, src string) *Runtime {
	t.Helper()
	doc, err := config.Load([]byte(head + src))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestCompileResolvesMockFaults(t *testing.T) {
	rt := compile(t, `proxies:
  - name: zeta
    type: http
    url: https://h/api
    replace: 0.25
    loss: {percentage: 0.5, status: 503}
    latency: {percentage: 1, min: 1, max: 2}
    headers: {x-injected: a}
    mocks:
      - {name: inherits, request: {method: GET, url: x}, response: {status: 200}}
      - name: own
        request: {method: GET, url: y}
        response: {status: 200}
        proxy: {replace: 1, loss: {percentage: 0.1, status: 429}, latency: {percentage: 1, min: 0.1, max: 0.2}}
`)
	p := rt.Proxies[0]
	if p.BasePath != "/api/" || p.Inject.Get("X-Injected") != "a" || p.Timeout.Seconds() != 30 {
		t.Fatalf("proxy: %+v", p)
	}
	inherits, own := p.Mocks[0], p.Mocks[1]
	if len(p.Faults) != 2 || p.Faults[0].(*fault.Loss).Status != 503 || p.Faults[1].(*fault.Latency).Max.Seconds() != 2 {
		t.Errorf("the proxy's faults, in roll order: %+v", p.Faults)
	}
	// Loss is never inherited; latency is the proxy's when the mock has none.
	if inherits.Replace != 0.25 || len(inherits.Faults) != 1 || *inherits.Faults[0].(*fault.Latency) != *p.Faults[1].(*fault.Latency) {
		t.Errorf("a mock without its own block: replace %v, faults %+v", inherits.Replace, inherits.Faults)
	}
	if own.Replace != 1 || len(own.Faults) != 2 || own.Faults[0].(*fault.Loss).Status != 429 || own.Faults[1].(*fault.Latency).Max.Seconds() != 0.2 {
		t.Errorf("a mock with its own block: %+v", own.Faults)
	}
}

func TestResolve(t *testing.T) {
	rt := compile(t, `proxies:
  - {name: zeta, type: http, url: 'http://h', resolve: {type: header, header: x-backend}}
  - {name: alpha, type: http, url: 'http://h', resolve: {type: header, header: X-Other}}
  - {name: dflt, type: http, url: 'http://h'}
`)
	h := http.Header{}
	if rt.Resolve(h).Name != "dflt" {
		t.Fatal("no header did not reach the default")
	}
	h.Set("X-Other", "alpha")
	h.Set("X-Backend", "zeta")
	if rt.Resolve(h).Name != "zeta" {
		t.Fatal("configuration order did not decide")
	}
	if len(rt.ResolutionHeaders) != 2 || rt.ResolutionHeaders[0] != "X-Backend" {
		t.Fatalf("resolution headers %v", rt.ResolutionHeaders)
	}
	if rt.Revision == "" {
		t.Fatal("no revision")
	}
}

func TestHolderSwaps(t *testing.T) {
	a, b := compile(t, ""), compile(t, "proxies: [{name: zeta, type: http, url: 'http://h'}]\n")
	h := NewHolder(a)
	if h.Load() != a {
		t.Fatal("load")
	}
	h.Swap(b)
	if h.Load() != b {
		t.Fatal("swap")
	}
}

func benchRuntime(b *testing.B) *Runtime {
	b.Helper()
	src := "proxies:\n"
	for i := range 10 {
		src += fmt.Sprintf("  - {name: p%02d, type: http, url: 'http://h', resolve: {type: header, header: X-Backend}}\n", i)
	}
	src += "  - name: dflt\n    type: http\n    url: http://h\n    mocks:\n"
	for i := range 20 {
		src += fmt.Sprintf("      - {name: m%02d, request: {method: GET, url: '^/api/v1/thing%02d/(?P<id>[0-9]+)$'}, response: {status: 200}}\n", i, i)
	}
	doc, err := config.Load([]byte(head + src))
	if err != nil {
		b.Fatal(err)
	}
	rt, _ := Compile(doc)
	return rt
}

// go test ./internal/runtime -run '^$' -bench . -benchmem
func BenchmarkResolve(b *testing.B) {
	rt := benchRuntime(b)
	h := http.Header{"X-Backend": {"p07"}, "Accept": {"*/*"}}
	b.ReportAllocs()
	for b.Loop() {
		if rt.Resolve(h).Name != "p07" {
			b.Fatal("wrong proxy")
		}
	}
}

func BenchmarkMockMatch(b *testing.B) {
	p := benchRuntime(b).Default
	b.ReportAllocs()
	for b.Loop() {
		if m, _ := p.Match("GET", "/api/v1/thing15/42"); m == nil || m.Name != "m15" {
			b.Fatal("no match")
		}
	}
}

// TestInheritKeepsTheCountsOfUnchangedProxies: a reload, or an edit of
// another proxy, keeps a proxy's attempt counts; an edit of the proxy
// itself starts them afresh.
func TestInheritKeepsTheCountsOfUnchangedProxies(t *testing.T) {
	const two = "proxies:\n  - {name: zeta, type: http, url: 'http://h'}\n  - {name: alpha, type: http, url: 'http://h', resolve: {type: header, header: X-B}}\n"
	old := compile(t, two)
	old.Proxies[0].Attempts.Next("r1")
	old.Proxies[1].Attempts.Next("r1")

	same := compile(t, two)
	same.Inherit(old)
	if same.Proxies[0].Attempts != old.Proxies[0].Attempts || same.Proxies[0].Attempts.Next("r1") != 1 {
		t.Error("an unchanged proxy lost its attempt counts")
	}
	edited := compile(t, strings.Replace(two, "url: 'http://h', resolve", "url: 'http://other', resolve", 1))
	edited.Inherit(old)
	if edited.Proxies[0].Attempts != old.Proxies[0].Attempts {
		t.Error("editing another proxy reset this one's counts")
	}
	if edited.Proxies[1].Attempts == old.Proxies[1].Attempts || edited.Proxies[1].Attempts.Next("r1") != 0 {
		t.Error("an edited proxy kept its counts")
	}
}
