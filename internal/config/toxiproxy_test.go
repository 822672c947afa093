package config

import (
	"strings"
	"testing"
)

func TestToxiproxySection(t *testing.T) {
	d, err := Load([]byte(doc("toxiproxy: {host: 127.0.0.1, port: 8474}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Toxiproxy == nil || d.Toxiproxy.Host.String() != "127.0.0.1" || d.Toxiproxy.Port != 8474 {
		t.Fatalf("toxiproxy = %+v", d.Toxiproxy)
	}
	canon, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(canon), "toxiproxy:\n  host: 127.0.0.1\n  port: 8474\n") {
		t.Errorf("the canonical form lacks the section:\n%s", canon)
	}
	d, err = Load([]byte(doc()))
	if err != nil {
		t.Fatal(err)
	}
	if d.Toxiproxy != nil {
		t.Errorf("absent, the section is off; got %+v", d.Toxiproxy)
	}
	if canon, _ := Canonical(d); strings.Contains(string(canon), "toxiproxy") {
		t.Errorf("an absent section is written:\n%s", canon)
	}
	expectOne(t, doc("toxiproxy: {host: 127.0.0.1}\n"), "toxiproxy.port", "")
	expectOne(t, doc("toxiproxy: {host: 127.0.0.1, port: 8474, admin: true}\n"), "toxiproxy.admin", "")
}

// V49: the Toxiproxy API's port is its own.
func TestToxiproxyPortIsItsOwn(t *testing.T) {
	tcp := "proxies:\n  - {name: db, type: tcp, listen: '127.0.0.1:15432', upstream: 'db:5432'}\n"
	for _, c := range []struct{ name, src, want string }{
		{"server", doc("toxiproxy: {host: 127.0.0.1, port: 8080}\n"), "must differ from server.port (both are 8080)"},
		{"admin", doc("toxiproxy: {host: 0.0.0.0, port: 8081}\n"), "must differ from admin.port (both are 8081)"},
		{"tcp listen", doc(tcp, "toxiproxy: {host: 127.0.0.1, port: 15432}\n"), "must differ from proxies[0].listen (127.0.0.1:15432, of `db`)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs := violations(t, c.src)
			if len(vs) != 1 || vs[0].Rule != "V49" || vs[0].Path != "toxiproxy.port" || !strings.Contains(vs[0].Message, c.want) {
				t.Fatalf("got %v, want one V49 at toxiproxy.port containing %q", vs, c.want)
			}
		})
	}
	if vs := violations(t, doc(tcp, "toxiproxy: {host: 127.0.0.1, port: 8474}\n")); len(vs) != 0 {
		t.Fatalf("a port of its own is valid, got %v", vs)
	}
}

func TestToxiproxyAllowListen(t *testing.T) {
	d, err := Load([]byte(doc("toxiproxy: {host: 127.0.0.1, port: 8474, allow_listen: [10.0.0.5, '::']}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Toxiproxy.AllowListen; len(got) != 2 || got[0].String() != "10.0.0.5" || got[1].String() != "::" {
		t.Fatalf("allow_listen = %v", got)
	}
	canon, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(canon), "  allow_listen:\n    - 10.0.0.5\n    - \"::\"\n") {
		t.Errorf("the canonical form lacks allow_listen:\n%s", canon)
	}
	expectOne(t, doc("toxiproxy: {host: 127.0.0.1, port: 8474, allow_listen: [db.internal]}\n"), "toxiproxy.allow_listen[0]", "not an IP address")
}

// proxy_metrics and runtime_metrics are Toxiproxy's -proxy-metrics and
// -runtime-metrics flags: off unless given.
func TestToxiproxyMetricsKeys(t *testing.T) {
	d, err := Load([]byte(doc("toxiproxy: {host: 127.0.0.1, port: 8474, proxy_metrics: true, runtime_metrics: true}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Toxiproxy.ProxyMetrics || !d.Toxiproxy.RuntimeMetrics {
		t.Fatalf("toxiproxy = %+v", d.Toxiproxy)
	}
	canon, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(canon), "  port: 8474\n  proxy_metrics: true\n  runtime_metrics: true\n") {
		t.Errorf("the canonical form lacks the metrics keys:\n%s", canon)
	}
	d, err = Load([]byte(doc("toxiproxy: {host: 127.0.0.1, port: 8474}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Toxiproxy.ProxyMetrics || d.Toxiproxy.RuntimeMetrics {
		t.Errorf("absent, the metrics are off; got %+v", d.Toxiproxy)
	}
	if canon, _ := Canonical(d); strings.Contains(string(canon), "metrics") {
		t.Errorf("keys not given are written:\n%s", canon)
	}
	expectOne(t, doc("toxiproxy: {host: 127.0.0.1, port: 8474, proxy_metrics: yes please}\n"), "toxiproxy.proxy_metrics", "")
}
