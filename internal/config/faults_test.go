package config

import (
	"strings"
	"testing"
)

// TestTransportFaultsAreBounded: each mistake is refused at load with its
// path and a fix; the good spellings load.
func TestTransportFaultsAreBounded(t *testing.T) {
	for _, c := range []struct{ faults, path, says string }{
		{"abort: {percentage: 0.1, at: bodyy}", "proxies[0].abort.at", "use request (before anything goes upstream), response (after the upstream answered) or body"},
		{"abort: {percentage: 0.1, at: body, how: rst}", "proxies[0].abort.how", "use reset (a TCP RST) or close (a FIN)"},
		{"abort: {percentage: 0.1, at: request, after: 1Ki}", "proxies[0].abort.after", "applies only with at: body, not at: request; remove after, or set at: body"},
		{"abort: {percentage: 0.1, after: 10}", "proxies[0].abort.at", "required"},
		{"abort: {percentage: 0.1, at: body, after: -1}", "proxies[0].abort.after", "after is 0 to 1Gi bytes"},
		{"bandwidth: {percentage: 1, bytes_per_second: 0}", "proxies[0].bandwidth.bytes_per_second", "give at least 1, such as 16Ki"},
		{"bandwidth: {percentage: 1, bytes_per_second: 16K}", "proxies[0].bandwidth.bytes_per_second", "write 16Ki or 16kB"},
		{"hang: {percentage: 0.1, seconds: -1}", "proxies[0].hang.seconds", "-1 is negative: a hang lasts 0 to 3600 seconds"},
		{"hang: {percentage: 0.1, seconds: 3601}", "proxies[0].hang.seconds", "over the 3600-second maximum"},
		{"loss: {percentage: 0.1, status: 429, retry_after: 1.5}", "proxies[0].loss.retry_after", "whole seconds, 0 to 86400; write 2"},
		{"loss: {percentage: 0.1, status: 429, retry_after: 86401}", "proxies[0].loss.retry_after", "0 to 86400"},
		{"loss: {percentage: 0.1, status: 503, grpc_status: 17}", "proxies[0].loss.grpc_status", "17 is not a gRPC status code: 0 (OK) to 16"},
		{"loss: {percentage: 0.1, status: 503, grpc_status: -1}", "proxies[0].loss.grpc_status", "-1 is not a gRPC status code"},
		{"loss: {percentage: 0.1, status: 503, grpc_status: unavailable}", "proxies[0].loss.grpc_status", "a gRPC status code"},
		{"loss: {percentage: 0.1, grpc_status: 14}", "proxies[0].loss.status", "required"},
		{"loss: {percentage: 0.1, status: 429, headers: {'X A': b}}", "proxies[0].loss.headers", ""},
	} {
		vs := violations(t, proxyDoc(c.faults))
		found := false
		for _, v := range vs {
			if strings.HasPrefix(v.Path, c.path) && strings.Contains(v.Message, c.says) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: got %v, want at %s: ...%s...", c.faults, vs, c.path, c.says)
		}
	}
	// A mock's own block, V41 included.
	vs := violations(t, mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200}\nproxy: {abort: {percentage: 1, at: response, after: 3}}"))
	if len(vs) != 1 || vs[0].Rule != "V41" || vs[0].Path != "proxies[0].mocks[0].proxy.abort.after" {
		t.Errorf("a mock's abort: %v", vs)
	}
	good := proxyDoc("abort: {percentage: 0.1, at: body, after: 1Ki, how: close}\nhang: {percentage: 0.05, seconds: 0.5}\n" +
		"bandwidth: {percentage: 1, bytes_per_second: 16Ki}\nloss: {percentage: 0.2, status: 429, retry_after: 2, headers: {X-Why: quota}, grpc_status: 14}")
	d, err := Load([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	p := d.Proxies[0]
	if int64(*p.Abort.After) != 1024 || p.Abort.How != AbortClose || float64(p.Hang.Seconds) != 0.5 || int64(p.Bandwidth.BytesPerSecond) != 16384 || int64(*p.Loss.RetryAfter) != 2 {
		t.Errorf("loaded %+v %+v %+v %+v", p.Abort, p.Hang, p.Bandwidth, p.Loss)
	}
}

// TestAMocksAbortAtResponseIsSaidOnce: V40, an advisory.
func TestAMocksAbortAtResponseIsSaidOnce(t *testing.T) {
	d, err := Load([]byte(mockDoc("name: mm\nrequest: {method: GET, url: x}\nresponse: {status: 200}\nproxy: {abort: {percentage: 1, at: response}}")))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range Advisories(d) {
		if a.Path == "proxies[0].mocks[0].proxy.abort.at" && strings.Contains(a.Message, "acts as at: request (V40)") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("advisories: %v", Advisories(d))
	}
}

// TestOldDocumentsKeepTheirRevision: a document without the new keys is
// written back as before.
func TestOldDocumentsKeepTheirRevision(t *testing.T) {
	d, err := Load([]byte(proxyDoc("loss: {percentage: 0.5, status: 503}")))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := Canonical(d)
	for _, k := range []string{"abort", "hang", "bandwidth", "retry_after", "headers"} {
		if strings.Contains(string(out), k+":") {
			t.Errorf("the canonical form gained %s:\n%s", k, out)
		}
	}
}

// TestWhenIsChecked: each mistake in a condition is refused at load with
// its path and the fix.
func TestWhenIsChecked(t *testing.T) {
	for _, c := range []struct{ when, path, says string }{
		{"{count: {first: 2, every: 3}}", "proxies[0].loss.when.count", "not first and every together; keep one, such as {first: 2}"},
		{"{count: {every: 0}}", "proxies[0].loss.when.count.every", "every: 0 would never fire"},
		{"{count: {}}", "proxies[0].loss.when.count", "needs one of first, every or after"},
		{"{headers: {X-Client: '^(mobile'}}", "proxies[0].loss.when.headers", "not a valid regex"},
		{"{per: {cookie: session}}", "proxies[0].loss.when.per", "cookie"},
		{"{per: {client: mac}}", "proxies[0].loss.when.per.client", "the only kind is ip"},
		{"{per: {header: X-Key, client: ip}}", "proxies[0].loss.when.per", "not both"},
		{"{window: {from: 5}}", "proxies[0].loss.when.window.for", "required"},
		{"{window: {from: -1, for: 3}}", "proxies[0].loss.when.window.from", "0 to 86400"},
		{"{count: {first: -2}}", "proxies[0].loss.when.count.first", "0 to"},
		{"{window: {from: 100, for: 0}}", "proxies[0].loss.when.window.for", "never open"},
	} {
		vs := violations(t, proxyDoc("loss: {percentage: 1, status: 503, when: "+c.when+"}"))
		found := false
		for _, v := range vs {
			if strings.HasPrefix(v.Path, c.path) && strings.Contains(v.Message, c.says) {
				found = true
			}
		}
		if !found {
			t.Errorf("when: %s: got %v, want at %s: ...%s...", c.when, vs, c.path, c.says)
		}
	}
	d, err := Load([]byte(proxyDoc("abort: {percentage: 1, at: request, when: {headers: {X-A: '^b'}, count: {after: 3}, per: {client: ip}, window: {from: 1, for: 2.5}}}")))
	if err != nil {
		t.Fatal(err)
	}
	if w := d.Proxies[0].Abort.When; w == nil || *w.Count.After != 3 || w.Per.Client != PerClientIP || float64(*w.Window.For) != 2.5 {
		t.Errorf("loaded %+v", w)
	}
}
