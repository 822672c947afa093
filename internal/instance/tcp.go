package instance

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/tcp"
	"github.com/doppelproxy/doppel/internal/telemetry"
	"github.com/doppelproxy/doppel/internal/toxiproxy"
)

// startTCP starts the document's tcp proxies and keeps them equal to the
// configuration in force. One that cannot listen at start stops the
// start; after a change it is logged, and the others are in force.
func startTCP(doc *config.Document, o Options, ctl *change.Controller, jr *journal.Journal, m *telemetry.Metrics) (*tcp.Fleet, error) {
	f := &tcp.Fleet{Report: func(r tcp.Record) { recordConnection(o.Log, jr, m, r) }}
	if o.Seed != "" {
		f.Roller = fault.NewSeeded(o.Seed)
	}
	if err := f.Apply(doc); err != nil {
		f.Close()
		return nil, err
	}
	// A change naming an address another process holds is refused whole,
	// like an invalid document: stored or swapped in, it would not be in
	// force.
	ctl.Check(func(_ context.Context, next *config.Document) []config.Violation {
		var vs []config.Violation
		for i, p := range next.Proxies {
			if p.Type != config.KindTCP || p.Listen == nil {
				continue
			}
			if err := f.CanListen(p.Listen.String()); err != nil {
				vs = append(vs, config.Violation{Path: fmt.Sprintf("proxies[%d].listen", i),
					Message: fmt.Sprintf("%s cannot be listened on: %v", p.Listen, err)})
			}
		}
		return vs
	})
	ctl.OnSwap(func(_, next *runtime.Runtime) {
		if err := f.Apply(next.Document); err != nil {
			o.Log.Error("a tcp proxy of the configuration in force is not listening: "+err.Error(), "revision", string(next.Revision))
		}
	})
	return f, nil
}

// startToxiproxy binds the Toxiproxy-compatible API when the document has
// a toxiproxy section (SPEC §17.8), and serves it at once, as the tcp
// proxies relay at once. Its proxies listen on loopback, on its own host
// or where allow_listen says, and never relay to one of own's listeners
// or its own. stop ends its server and every proxy its clients made;
// what they made is in memory only, gone with the instance.
func startToxiproxy(doc *config.Document, o Options, jr *journal.Journal, m *telemetry.Metrics, own func() []toxiproxy.Listener) (stop func(), err error) {
	t := doc.Toxiproxy
	if t == nil {
		return func() {}, nil
	}
	addr := net.JoinHostPort(t.Host.String(), strconv.Itoa(int(t.Port)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, bindError("the Toxiproxy API", addr, "toxiproxy.host and toxiproxy.port", "toxiproxy.port", err)
	}
	// Its connections are journaled and counted as a tcp proxy's are; the
	// line says where the proxy came from, and which toxics applied.
	api := &toxiproxy.Server{
		Report: func(r tcp.Record) {
			recordConnection(o.Log, jr, m, r, "toxics", strings.Join(r.Toxics, ","), "source", "toxiproxy")
		},
		Host: t.Host.Addr,
		Own: func() []toxiproxy.Listener {
			return append(own(), toxiproxy.Listener{Name: "Toxiproxy API", Addr: ln.Addr()})
		},
		ProxyMetrics:   t.ProxyMetrics,
		RuntimeMetrics: t.RuntimeMetrics,
	}
	for _, h := range t.AllowListen {
		api.AllowListen = append(api.AllowListen, h.Addr)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.Serve(ln) }()
	o.Log.Info("the Toxiproxy-compatible API is listening; what its clients make lives in memory", "toxiproxy_addr", ln.Addr().String())
	return func() {
		_ = srv.Close()
		api.Close()
	}, nil
}

// ownListeners are the instance's TCP listeners as they are now: the
// proxy listener, the admin API's and the tcp proxies'.
func (i *Instance) ownListeners() []toxiproxy.Listener {
	own := []toxiproxy.Listener{{Name: "proxy listener", Addr: i.proxies.ln.Addr()}}
	if i.admin.ln != nil {
		own = append(own, toxiproxy.Listener{Name: "admin API", Addr: i.admin.ln.Addr()})
	}
	for name, a := range i.TCP.Addrs() {
		own = append(own, toxiproxy.Listener{Name: "tcp proxy " + strconv.Quote(name), Addr: a})
	}
	return own
}

// recordConnection writes a tcp proxy's connection to the log and the
// journal: one entry per connection, with what it relayed each way.
func recordConnection(log *telemetry.Logger, jr *journal.Journal, m *telemetry.Metrics, r tcp.Record, more ...any) {
	fault := ""
	switch {
	case slices.Contains(r.Toxics, "hang"):
		fault = "hang"
	case slices.Contains(r.Toxics, "abort") && r.Cut:
		fault = "abort"
	}
	// The journal and the metrics before the line: whoever reads the line
	// finds the entry.
	rec := &telemetry.Exchange{RequestID: telemetry.NewRequestID(), Proxy: r.Proxy, Method: "TCP", Client: peerHost(r.Client),
		Duration: r.Duration, LatencyWaited: r.Latency, Tunnel: &telemetry.Tunnel{Up: r.Up, Down: r.Down, Duration: r.Duration}}
	for _, t := range r.Toxics {
		detail := ""
		if t == "abort" {
			detail = "body"
			if r.Early {
				detail = "request"
			}
		}
		rec.Fire(t, detail)
	}
	if rc := jr.Active(); rc != nil {
		rc.Record(rec, time.Now().Add(-r.Duration))
	}
	m.ObserveConnection(r.Proxy, fault, r.Toxics, r.Up, r.Down)
	attrs := []any{"proxy", r.Proxy, "client", r.Client, "bytes_up", r.Up, "bytes_down", r.Down,
		"duration_ms", telemetry.Millis(r.Duration), "latency_injected_ms", telemetry.Millis(r.Latency), "fault", fault}
	if r.Err != nil {
		attrs = append(attrs, "error", r.Err.Error())
	}
	log.Info("connection", append(attrs, more...)...)
}

func peerHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
