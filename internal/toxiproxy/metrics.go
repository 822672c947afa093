package toxiproxy

import (
	"net/http"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/doppelproxy/doppel/internal/tcp"
)

// Toxiproxy 2.12.0's Prometheus metrics, served at /metrics only when
// asked for, as Toxiproxy serves them only with its -proxy-metrics or
// -runtime-metrics flag (Server.ProxyMetrics, Server.RuntimeMetrics).
// The series are Toxiproxy's own: the same names, labels and types, in a
// registry of their own, apart from Doppel's metrics on the admin API.

// maxRetired bounds the series kept for proxies that stopped, were
// deleted or listen elsewhere now: Toxiproxy keeps every series for
// good, and a client making proxies on port 0 (a new listener label each
// time) would grow them without end. The oldest go first.
const maxRetired = MaxProxies

// series is one proxy's labels beside direction: its name, the address
// its listener is bound to, its upstream as written.
type series struct{ proxy, listener, upstream string }

// metrics are the API's registry and its proxies' byte counters.
type metrics struct {
	handler http.Handler
	// received and sent are Toxiproxy's byte counters; nil without
	// proxy metrics.
	received, sent *prometheus.CounterVec

	mu      sync.Mutex
	retired []series // oldest first
}

// newMetrics registers what Toxiproxy registers: with proxy, its two
// byte counters; with runtime, the client library's Go, build
// information and process collectors.
func newMetrics(proxy, runtime bool) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{}
	if runtime {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewBuildInfoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if proxy {
		labels := []string{"direction", "proxy", "listener", "upstream"}
		counter := func(name string) *prometheus.CounterVec {
			return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "toxiproxy", Subsystem: "proxy", Name: name}, labels)
		}
		m.received, m.sent = counter("received_bytes_total"), counter("sent_bytes_total")
		reg.MustRegister(m.received, m.sent)
	}
	// With its registry in the options, as Toxiproxy's handler has it:
	// promhttp_metric_handler_errors_total is served too.
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m
}

func (m *metrics) counting() bool { return m != nil && m.received != nil }

// relayReport is the Report of a proxy's relay about to listen: each
// record is counted under the proxy's series, then handed to next (nil
// for none). The series is known once the relay is bound, which the
// caller says with bound (once, before returning); a record of a
// connection that ended before waits for it.
func (m *metrics) relayReport(proxy, upstream string, next func(tcp.Record)) (report func(tcp.Record), bound func(listener string) series) {
	if !m.counting() {
		return next, func(listener string) series { return series{proxy, listener, upstream} }
	}
	var mu sync.Mutex
	var s series
	mu.Lock()
	report = func(r tcp.Record) {
		mu.Lock()
		at := s
		mu.Unlock()
		m.count(at, r)
		if next != nil {
			next(r)
		}
	}
	bound = func(listener string) series {
		s = series{proxy, listener, upstream}
		m.use(s)
		mu.Unlock()
		return s
	}
	return report, bound
}

// count adds a connection's bytes as Toxiproxy counts a link's: received
// is what was read from the side each direction starts at, sent what
// was written to the other. A connection whose upstream was not reached
// is no link there, and counts nothing.
func (m *metrics) count(s series, r tcp.Record) {
	if r.Err != nil {
		return
	}
	for _, d := range []struct {
		name       string
		read, sent int64
	}{{"upstream", r.ReadUp, r.Up}, {"downstream", r.ReadDown, r.Down}} {
		m.received.WithLabelValues(d.name, s.proxy, s.listener, s.upstream).Add(float64(d.read))
		m.sent.WithLabelValues(d.name, s.proxy, s.listener, s.upstream).Add(float64(d.sent))
	}
}

// use says s is a listening proxy's again: its series are kept.
func (m *metrics) use(s series) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retired = slices.DeleteFunc(m.retired, func(r series) bool { return r == s })
}

// retire says no proxy counts under s any more (its relay is closed, its
// records all counted); past maxRetired such, the oldest's series go.
func (m *metrics) retire(s series) {
	if !m.counting() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retired = append(slices.DeleteFunc(m.retired, func(r series) bool { return r == s }), s)
	for len(m.retired) > maxRetired {
		old := m.retired[0]
		m.retired = m.retired[1:]
		for _, dir := range []string{"upstream", "downstream"} {
			m.received.DeleteLabelValues(dir, old.proxy, old.listener, old.upstream)
			m.sent.DeleteLabelValues(dir, old.proxy, old.listener, old.upstream)
		}
	}
}
