package toxiproxy

import (
	"cmp"
	"net"
	"slices"

	"github.com/doppelproxy/doppel/internal/tcp"
)

// proxy is one proxy a Toxiproxy client made, on Doppel's relay. The
// server's lock guards it.
type proxy struct {
	name, listen, upstream string
	// written is the listen as the client wrote it, which the proxy
	// reports until it listens, as Toxiproxy does ("" once it has: then
	// the address bound).
	written  string
	resolved *address // upstream, as it was checked
	enabled  bool
	relay    *tcp.Proxy // while enabled
	addr     net.Addr   // the relay's, while enabled
	toxics   []*toxic   // in the order they were added
	report   func(tcp.Record)
	metrics  *metrics
	series   series // its metrics' labels, while enabled
}

// proxyJSON is a proxy as Toxiproxy's API writes it.
type proxyJSON struct {
	Name     string   `json:"name"`
	Listen   string   `json:"listen"`
	Upstream string   `json:"upstream"`
	Enabled  bool     `json:"enabled"`
	Toxics   []*toxic `json:"toxics"`
}

func (p *proxy) json() proxyJSON {
	listen := p.listen
	if p.written != "" {
		listen = p.written
	}
	return proxyJSON{Name: p.name, Listen: listen, Upstream: p.upstream, Enabled: p.enabled, Toxics: p.toxicList()}
}

// sortProxies orders proxies by name, as Toxiproxy's object of them is.
func sortProxies(all []proxyJSON) {
	slices.SortFunc(all, func(a, b proxyJSON) int { return cmp.Compare(a.Name, b.Name) })
}

// toxicList is Toxiproxy's order: the upstream chain, then the
// downstream one, each as added.
func (p *proxy) toxicList() []*toxic {
	out := make([]*toxic, 0, len(p.toxics))
	for _, stream := range []string{"upstream", "downstream"} {
		for _, t := range p.toxics {
			if t.Stream == stream {
				out = append(out, t)
			}
		}
	}
	return out
}

func (p *proxy) toxic(name string) (int, *toxic) {
	for i, t := range p.toxics {
		if t.Name == name {
			return i, t
		}
	}
	return -1, nil
}

// start listens on listen; the address bound is the proxy's listen from
// then on, as Toxiproxy reports it (a port 0 becomes the one chosen).
func (p *proxy) start() error {
	if p.enabled {
		return nil
	}
	report, bound := p.metrics.relayReport(p.name, p.upstream, p.report)
	r := &tcp.Proxy{Name: p.name, Upstream: p.upstream, Report: report, CloseUnreachable: true}
	r.SetToxics(p.chains())
	addr, err := r.Listen(p.listen)
	if err != nil {
		return err
	}
	p.relay, p.addr, p.listen, p.written, p.enabled = r, addr, addr.String(), "", true
	p.series = bound(p.listen)
	return nil
}

// stop stops listening and ends the proxy's connections; their records
// are all in before it returns.
func (p *proxy) stop() {
	if !p.enabled {
		return
	}
	_ = p.relay.Close()
	p.metrics.retire(p.series)
	p.relay, p.addr, p.enabled = nil, nil, false
}

// apply puts the toxics in force, on open connections too.
func (p *proxy) apply() {
	if p.relay != nil {
		p.relay.SetToxics(p.chains())
	}
}

func (p *proxy) chains() *tcp.Toxics {
	var t tcp.Toxics
	for _, x := range p.toxics {
		e, ok := x.entry()
		switch {
		case !ok:
		case x.Stream == "upstream":
			t.Up = append(t.Up, e)
		default:
			t.Down = append(t.Down, e)
		}
	}
	return &t
}
