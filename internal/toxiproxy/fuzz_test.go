package toxiproxy

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// FuzzDecodeToxic: any body is a toxic that passes its own checks, or
// Toxiproxy's error with a 4xx status; never a panic, never a negative
// time handed to the relay.
func FuzzDecodeToxic(f *testing.F) {
	for _, s := range []string{
		`{"type":"latency","attributes":{"latency":100,"jitter":10}}`,
		`{"name":"x","type":"slicer","stream":"upstream","toxicity":0.5,"attributes":{"average_size":64,"size_variation":32,"delay":10}}`,
		`{"type":"limit_data","attributes":{"bytes":-1}}`,
		`{"type":"bandwidth","attributes":{"rate":9223372036854775807}}`,
		`{"type":"timeout","attributes":null}`, `{"type":"noop","attributes":{"x":1}}`, `{"type":"nope"}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tx, e := decodeToxic(body, func(string) bool { return false })
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if checkName("name", tx.Name) != nil || tx.Toxicity < 0 || tx.Toxicity > 1 || (tx.Stream != "upstream" && tx.Stream != "downstream") {
			t.Fatalf("decoded %+v", tx)
		}
		if err := tx.Attributes.check(); err != nil {
			t.Fatal(err)
		}
		if e, ok := tx.entry(); ok != (e.Toxic != nil) {
			t.Fatalf("entry %+v, %v", e, ok)
		}
		if _, err := json.Marshal(tx); err != nil {
			t.Fatal(err)
		}
		if _, e := decodeUpdate(tx, body); e != nil && (e.Status < 400 || e.Status > 499) {
			t.Fatalf("update error %+v", e)
		}
	})
}

// FuzzDecodeProxy: any body is a proxy with a name and an upstream, or
// Toxiproxy's 400.
func FuzzDecodeProxy(f *testing.F) {
	for _, s := range []string{
		`{"name":"db","listen":"127.0.0.1:0","upstream":"db:5432"}`,
		`{"name":"db","upstream":"db:5432","enabled":false}`,
		`{"name":""}`, `{"upstream":1}`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, e := decodeProxy(body)
		if e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if p.Name == "" || p.Upstream == "" || len(p.Name) > MaxName || strings.Trim(p.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			t.Fatalf("decoded %+v", p)
		}
	})
}

// FuzzListenAndUpstream: any listen or upstream is HOST:PORT within its
// bounds, or Toxiproxy's 400; a listen with an IP address (no lookup)
// binds only where the policy allows.
func FuzzListenAndUpstream(f *testing.F) {
	for _, s := range []string{"127.0.0.1:0", "0.0.0.0:8666", "[::1]:5432", ":0", "[fe80::1%eth0]:1", "[::ffff:10.0.0.1]:1", "db:5432", "x", "1.2.3.4:99999", ""} {
		f.Add(s)
	}
	lp := listenPolicy{host: netip.MustParseAddr("10.0.0.1"), allow: []netip.Addr{netip.MustParseAddr("::")}}
	f.Fuzz(func(t *testing.T, s string) {
		for _, min := range []int{0, 1} {
			a, e := parseAddress("listen", s, min)
			if e != nil {
				if e.Status != 400 || len(e.Message) > 400 {
					t.Fatalf("error %+v", e)
				}
				continue
			}
			if len(a.host) > maxHost || int(a.port) < min {
				t.Fatalf("parsed %+v", a)
			}
		}
		host, _, err := net.SplitHostPort(s)
		if err != nil {
			return
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "" {
			return
		}
		bind, e := lp.bind(context.Background(), s)
		if e != nil {
			if e.Status != 400 {
				t.Fatalf("error %+v", e)
			}
			return
		}
		ap, err := netip.ParseAddrPort(bind)
		if err != nil || !lp.allows(ap.Addr()) {
			t.Fatalf("%q binds %q", s, bind)
		}
	})
}
