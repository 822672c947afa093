package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/goccy/go-yaml/ast"
)

// TCP proxies (SPEC §17.8): `type: tcp` relays the connections its
// listener accepts to an upstream address, with the connection faults.

// KindTCP is a proxy of connections rather than requests.
const KindTCP ProxyKind = "tcp"

// HostPort is a TCP address, HOST:PORT: an IP address or a host name, and
// a port 1..65535.
type HostPort struct {
	Host string
	Port uint16
}

func (v HostPort) String() string { return net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port))) }

// IsIP reports whether the host is an IP address, as a listener's must be.
func (v HostPort) IsIP() bool {
	_, err := netip.ParseAddr(v.Host)
	return err == nil
}

// ParseHostPort reads HOST:PORT.
func ParseHostPort(s string) (HostPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return HostPort{}, err
	}
	if host == "" {
		return HostPort{}, errHostPort("the host is empty; write 127.0.0.1:PORT, or 0.0.0.0:PORT for every interface")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return HostPort{}, errHostPort("the port " + quote(port) + " is not 1 to 65535")
	}
	return HostPort{Host: host, Port: uint16(n)}, nil
}

type errHostPort string

func (e errHostPort) Error() string { return string(e) }

func (v *HostPort) UnmarshalYAML(n ast.Node) error {
	s, err := stringValue(n, "HOST:PORT")
	if err != nil {
		return err
	}
	hp, err := ParseHostPort(s)
	if err != nil {
		return refuse(n, "%s is not HOST:PORT: %v", quote(s), err)
	}
	*v = hp
	return nil
}

func (v HostPort) MarshalYAML() (any, error) { return v.String(), nil }

func (HostPort) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "description": "HOST:PORT: an IP address or a host name, and a port 1 to 65535.", "examples": []any{"127.0.0.1:15432", "db.internal:5432"}}
}

// validateTCP is the rules of a tcp proxy, and of an http one's tcp keys.
func validateTCP(at string, p Proxy) []Violation {
	var vs []Violation
	add := func(rule, key, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Path: joinPath(at, key), Message: fmt.Sprintf(format, args...)})
	}
	if p.Type != KindTCP {
		// V47: an http proxy has a url, and no tcp keys.
		if p.URL == nil {
			add("V47", "url", "is required for an http proxy")
		}
		for key, set := range map[string]bool{"listen": p.Listen != nil, "upstream": p.Upstream != nil} {
			if set {
				add("V47", key, "is a tcp proxy's key; an http proxy forwards to url")
			}
		}
		if p.Latency != nil && p.Latency.Jitter != nil {
			add("V47", "latency.jitter", "is a tcp proxy's: an http answer's delay is a range, min to max")
		}
		return vs
	}
	// V48: a tcp proxy has a listen and an upstream address, and none of
	// what only requests have.
	if p.Listen == nil {
		add("V48", "listen", "is required for a tcp proxy: the HOST:PORT its listener binds")
	} else if !p.Listen.IsIP() {
		add("V48", "listen", "%s: the host a listener binds is an IP address (127.0.0.1, 0.0.0.0), not a name", quote(p.Listen.String()))
	}
	if p.Upstream == nil {
		add("V48", "upstream", "is required for a tcp proxy: the HOST:PORT connections are relayed to")
	}
	for key, set := range map[string]bool{
		"url": p.URL != nil, "resolve": p.Resolve != nil, "mocks": len(p.Mocks) > 0, "headers": len(p.Headers) > 0,
		"rewrite_redirects": p.RewriteRedirects != nil, "rewrite_urls": p.RewriteURLs != nil, "replace": p.Replace != nil,
		"receipts": p.Receipts != ReceiptsOff, "timeout": p.Timeout != 0, "body_limit": p.BodyLimit != 0,
	} {
		if set {
			add("V48", key, "has no meaning on a tcp proxy, which relays bytes: there are no requests, mocks or headers")
		}
	}
	if p.Loss != nil {
		add("V48", "loss", "has no meaning on a tcp proxy; abort {at: request} resets a share of the connections instead")
	}
	if p.Abort != nil && p.Abort.At == AbortAtResponse {
		add("V48", "abort.at", "a tcp proxy cuts at request (before relaying) or body (after `after` bytes either way); there is no response")
	}
	for name, w := range map[string]*When{"latency": whenOf(p.Latency), "abort": whenOfAbort(p.Abort), "hang": whenOfHang(p.Hang), "bandwidth": whenOfBandwidth(p.Bandwidth)} {
		if w == nil {
			continue
		}
		if len(w.Headers) > 0 {
			add("V48", name+".when.headers", "a connection has no headers")
		}
		if w.Per != nil && w.Per.Header != "" {
			add("V48", name+".when.per.header", "a connection has no headers: count per {client: ip}, or per proxy")
		}
	}
	return vs
}

func whenOf(l *Latency) *When {
	if l == nil {
		return nil
	}
	return l.When
}

func whenOfAbort(a *Abort) *When {
	if a == nil {
		return nil
	}
	return a.When
}

func whenOfHang(h *Hang) *When {
	if h == nil {
		return nil
	}
	return h.When
}

func whenOfBandwidth(b *Bandwidth) *When {
	if b == nil {
		return nil
	}
	return b.When
}

// validateListens is V50: each tcp proxy listens on a port of its own,
// apart from the proxy and admin listeners' (their hosts aside: a
// wildcard bind takes the port on every address).
func validateListens(d *Document) []Violation {
	var vs []Violation
	seen := map[uint16]int{}
	for i, p := range d.Proxies {
		if p.Type != KindTCP || p.Listen == nil {
			continue
		}
		at := fmt.Sprintf("proxies[%d].listen", i)
		port := p.Listen.Port
		switch {
		case port == uint16(d.Server.Port):
			vs = append(vs, Violation{Rule: "V50", Path: at, Message: fmt.Sprintf("port %d is server.port's: a tcp proxy listens on a port of its own", port)})
		case port == uint16(d.Admin.Port):
			vs = append(vs, Violation{Rule: "V50", Path: at, Message: fmt.Sprintf("port %d is admin.port's: a tcp proxy listens on a port of its own", port)})
		}
		if j, dup := seen[port]; dup {
			vs = append(vs, Violation{Rule: "V50", Path: at, Message: fmt.Sprintf("port %d is proxies[%d]'s (%s) already", port, j, d.Proxies[j].Name)})
		} else {
			seen[port] = i
		}
	}
	return vs
}
