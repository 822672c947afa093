package config

import "fmt"

// Toxiproxy is the Toxiproxy-compatible API's listener (SPEC §17.8): off
// when the section is absent. What its clients create lives in memory,
// never in the document.
type Toxiproxy struct {
	Host Host `yaml:"host" required:"true" doc:"The IP address the Toxiproxy-compatible API binds (not a hostname). Toxiproxy's own default is 127.0.0.1."`
	Port Port `yaml:"port" required:"true" doc:"The TCP port of the Toxiproxy-compatible API (Toxiproxy's is 8474). Must differ from server.port, admin.port and every tcp proxy's listen port."`
	// The API has no authentication, as Toxiproxy's has none: where its
	// clients may open listeners is the document's to say.
	AllowListen []Host `yaml:"allow_listen,omitempty" doc:"IP addresses, beyond loopback and host itself, that a proxy made through the API may listen on (0.0.0.0 or :: for every interface). Defaults to none."`
	// Toxiproxy serves its metrics only when its -proxy-metrics and
	// -runtime-metrics flags ask for them; these are those flags.
	ProxyMetrics   bool `yaml:"proxy_metrics,omitempty" doc:"Serve Toxiproxy's proxy metrics (toxiproxy_proxy_received_bytes_total, toxiproxy_proxy_sent_bytes_total) at the API's /metrics, as Toxiproxy's -proxy-metrics flag does. Defaults to false."`
	RuntimeMetrics bool `yaml:"runtime_metrics,omitempty" doc:"Serve the Go runtime's, the build's and the process's metrics at the API's /metrics, as Toxiproxy's -runtime-metrics flag does. Defaults to false."`
}

// validateToxiproxy is V49: the Toxiproxy API's port is its own, apart
// from the two listeners' and the tcp proxies'.
func validateToxiproxy(d *Document) []Violation {
	t := d.Toxiproxy
	if t == nil || t.Port == 0 {
		return nil
	}
	const at = "toxiproxy.port"
	var vs []Violation
	add := func(format string, args ...any) {
		vs = append(vs, Violation{Rule: "V49", Path: at, Message: fmt.Sprintf(format, args...)})
	}
	if t.Port == d.Server.Port {
		add("must differ from server.port (both are %d)", t.Port)
	}
	if t.Port == d.Admin.Port {
		add("must differ from admin.port (both are %d)", t.Port)
	}
	for i, p := range d.Proxies {
		if p.Type == KindTCP && p.Listen != nil && p.Listen.Port == uint16(t.Port) {
			add("must differ from proxies[%d].listen (%s, of %s)", i, p.Listen.String(), quote(string(p.Name)))
		}
	}
	return vs
}
