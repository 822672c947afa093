package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds the loader arbitrary bytes. It must never panic, and a
// document it accepts must survive a trip through its canonical form with
// the same revision: that is what config pull followed by config push does.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/*.yaml")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(proxyDoc("body_limit: 1Mi\nheaders: {X-A: a}\nloss: {percentage: 0.5, status: 503}")))
	f.Add([]byte(mockDoc("name: mm\nrequest: {method: GET, url: '(?P<id>.)', query: {q: .q}}\nresponse: {status: 200, json: '{\"a\": \"{{ id }}\"}', headers: {X-B: '{{ q }}'}}")))
	f.Add([]byte(proxyDoc("abort: {percentage: 0.1, at: body, after: 1Ki, how: close}\nhang: {percentage: 0.05, seconds: 0.5}\nbandwidth: {percentage: 1, bytes_per_second: 16Ki}\nloss: {percentage: 0.2, status: 429, retry_after: 2, headers: {X-Why: quota}}")))
	f.Add([]byte(proxyDoc("abort: {percentage: 1, at: response, after: 0}\nbandwidth: {percentage: 1, bytes_per_second: '1 MB'}")))
	f.Add([]byte(proxyDoc("loss: {percentage: 1, status: 503, when: {headers: {X-C: '^m'}, count: {first: 2}, per: {header: Idempotency-Key}, window: {from: 0, for: 30}}}")))
	f.Add([]byte(tlsDoc("{auto: true, ca_file: ca.pem, state_dir: st}")))
	f.Add([]byte(tlsDoc("{cert: c.pem, key: k.pem}")))
	f.Add([]byte("server: [1\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := Load(src)
		if err != nil {
			return
		}
		once, err := Canonical(d)
		if err != nil {
			t.Fatalf("an accepted document cannot be written back: %v", err)
		}
		again, err := Load(once)
		if err != nil {
			t.Fatalf("the canonical form of an accepted document is refused: %v\n%s", err, once)
		}
		twice, _ := Canonical(again)
		if !bytes.Equal(once, twice) {
			t.Fatalf("the canonical form is not stable:\n%s\n---\n%s", once, twice)
		}
	})
}

// FuzzParseSession: any body is refused with violations or read into a
// session over a proxy that exists, with its ttl set.
func FuzzParseSession(f *testing.F) {
	f.Add([]byte(`{"ttl": 300, "proxies": {"zeta": {"loss": {"percentage": 1, "status": 503, "when": {"count": {"first": 2}, "per": {"header": "K"}}}}}}`))
	f.Add([]byte(`{"id": "s-1", "proxies": {"zeta": {"mocks": [{"name": "mm", "request": {"method": "GET", "url": "^/a$"}, "response": {"status": 200, "body": "{{ x }}"}}]}}}`))
	f.Add([]byte(`{"proxies": {"nobody": {}}}`))
	f.Add([]byte(`{"ttl": 0}`))
	d, err := Load([]byte(proxyDoc("")))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := ParseSession(src, d)
		if err != nil {
			return
		}
		if s.TTL == nil || len(s.Proxies) == 0 {
			t.Fatalf("accepted without a ttl or a proxy: %+v", s)
		}
		for name := range s.Proxies {
			if d.Proxy(string(name)) == nil {
				t.Fatalf("accepted an overlay on %s, which does not exist", name)
			}
		}
	})
}
