package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func tlsDoc(tls string) string {
	return "server: {host: 127.0.0.1, port: 8080, tls: " + tls + "}\n" + baseAdmin
}

// TestTLSIsCertAndKeyOrAuto: each mistake in server.tls is one violation at
// its key, saying what to do; the two right shapes load.
func TestTLSIsCertAndKeyOrAuto(t *testing.T) {
	for _, c := range []struct{ tls, rule, path, says string }{
		{"{cert: c.pem, key: k.pem, auto: true}", "V45", "server.tls.auto", "keep either cert and key, or auto"},
		{"{cert: c.pem}", "V45", "server.tls.key", "is required with cert"},
		{"{key: k.pem}", "V45", "server.tls.cert", "is required with key"},
		{"{}", "V45", "server.tls", "needs cert and key (PEM files), or auto: true"},
		{"{auto: false}", "V45", "server.tls", "leave server.tls out to serve plain HTTP"},
		{"{cert: c.pem, key: k.pem, ca_file: ca.pem}", "V46", "server.tls.ca_file", "applies only with auto: true"},
		{"{cert: c.pem, key: k.pem, state_dir: st}", "V46", "server.tls.state_dir", "applies only with auto: true"},
	} {
		vs := violations(t, tlsDoc(c.tls))
		if len(vs) != 1 || vs[0].Rule != c.rule || vs[0].Path != c.path || !strings.Contains(vs[0].Message, c.says) {
			t.Errorf("tls: %s: got %v, want %s at %s: ...%s...", c.tls, vs, c.rule, c.path, c.says)
		}
		// A key left out has no line of its own.
		if len(vs) == 1 && vs[0].Line != 1 && !strings.Contains(vs[0].Message, "is required") {
			t.Errorf("tls: %s: line %d, want 1", c.tls, vs[0].Line)
		}
	}
	for _, c := range []struct{ tls, says string }{
		{"{cert: '', key: k.pem}", "a path may not be empty"},
		{"{auto: yes please}", "must be true or false"},
		{"{certificate: c.pem}", "unknown key `certificate`; known keys here are cert, key, auto, ca_file, state_dir"},
		{"true", "must be a mapping"},
	} {
		vs := violations(t, tlsDoc(c.tls))
		if len(vs) == 0 || !strings.HasPrefix(vs[0].Path, "server.tls") || !strings.Contains(vs[0].Message, c.says) {
			t.Errorf("tls: %s: got %v, want at server.tls...: ...%s...", c.tls, vs, c.says)
		}
	}
	d := mustLoad(t, tlsDoc("{cert: c.pem, key: k.pem}"))
	if tls := d.Server.TLS; tls == nil || tls.Cert != "c.pem" || tls.Key != "k.pem" || tls.Auto {
		t.Errorf("cert and key: %+v", d.Server.TLS)
	}
	d = mustLoad(t, tlsDoc("{auto: true, ca_file: /x/ca.pem, state_dir: /x/st}"))
	if tls := d.Server.TLS; tls == nil || !tls.Auto || tls.CAFile != "/x/ca.pem" || tls.StateDir != "/x/st" {
		t.Errorf("auto: %+v", d.Server.TLS)
	}
}

// TestTLSKeepsOldRevisions: a document without server.tls writes none in
// its canonical form; one with it writes it back as given.
func TestTLSKeepsOldRevisions(t *testing.T) {
	out, _ := Canonical(mustLoad(t, doc()))
	if strings.Contains(string(out), "tls") {
		t.Errorf("the canonical form gained tls:\n%s", out)
	}
	out, _ = Canonical(mustLoad(t, tlsDoc("{auto: true}")))
	if !strings.Contains(string(out), "  tls:\n    auto: true\n") {
		t.Errorf("the canonical form of auto:\n%s", out)
	}
	if revision(t, tlsDoc("{auto: true}")) == revision(t, doc()) {
		t.Error("server.tls does not change the revision")
	}
}

// TestTLSAutoFiles: the document's paths win; the defaults are beside the
// configuration file, else in the state home.
func TestTLSAutoFiles(t *testing.T) {
	cfg := filepath.Join("etc", "doppel", "main.yaml")
	home := filepath.Join("state", "doppel")
	for _, c := range []struct {
		tls               TLS
		config, home      string
		wantCA, wantState string
	}{
		{TLS{Auto: true}, cfg, home, filepath.Join("etc", "doppel", "doppel-ca.pem"), filepath.Join("etc", "doppel", ".doppel-tls")},
		{TLS{Auto: true}, "", home, filepath.Join(home, "doppel-ca.pem"), home},
		{TLS{Auto: true, CAFile: "ca.pem", StateDir: "st"}, cfg, home, "ca.pem", "st"},
		{TLS{Auto: true, StateDir: "st"}, "", home, filepath.Join(home, "doppel-ca.pem"), "st"},
		{TLS{Auto: true}, "", "", "", ""},
	} {
		ca, st := c.tls.AutoFiles(c.config, c.home)
		if ca != c.wantCA || st != c.wantState {
			t.Errorf("%+v with %q, %q: got %q, %q; want %q, %q", c.tls, c.config, c.home, ca, st, c.wantCA, c.wantState)
		}
	}
}
