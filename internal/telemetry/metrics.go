package telemetry

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// Buckets are explicit, so that quantiles can be aggregated across
// replicas: proxied traffic can be slow on purpose (up to a minute), the
// admin API has no business taking more than seconds.
var (
	ProxyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60}
	AdminBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
)

// knownMethods bound the method label: anything else is OTHER, so a
// client inventing methods cannot create series.
var knownMethods = []string{
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "QUERY",
	"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK",
}

// MethodLabel is method when it is a known one, else OTHER.
func MethodLabel(method string) string {
	if slices.Contains(knownMethods, method) {
		return method
	}
	return "OTHER"
}

// Metrics are Doppel's Prometheus metrics. No recording method takes a
// path: there is no path label anywhere, by construction.
type Metrics struct {
	reg              *prometheus.Registry
	proxyDuration    *prometheus.HistogramVec
	upstreamDuration *prometheus.HistogramVec
	adminDuration    *prometheus.HistogramVec
	loss             *prometheus.CounterVec
	latency          *prometheus.CounterVec
	faults           *prometheus.CounterVec
	mockHits         *prometheus.CounterVec
	lastError        *prometheus.GaugeVec
	proxyMocks       *prometheus.GaugeVec
	tcpConnections   *prometheus.CounterVec
	tcpBytes         *prometheus.CounterVec
	counterFallback  *prometheus.CounterVec

	// The histograms' series by their labels, once looked up: a vector's
	// own lookup hashes the label values under a lock every request
	// shares, and formats the status. No series is ever deleted, so one
	// found stays valid; there are as many as the series themselves.
	proxySeries, upstreamSeries sync.Map // proxySeries or upstreamSeries -> prometheus.Observer
}

type proxySeries struct {
	proxy, method            string
	status                   int
	replace, loss, upstreamE bool
}

type upstreamSeries struct {
	proxy, method string
	status        int
}

func (m *Metrics) proxyObserver(k proxySeries) prometheus.Observer {
	if o, ok := m.proxySeries.Load(k); ok {
		return o.(prometheus.Observer)
	}
	o := m.proxyDuration.WithLabelValues(k.proxy, k.method, strconv.Itoa(k.status), flag(k.replace), flag(k.loss), flag(k.upstreamE))
	m.proxySeries.Store(k, o)
	return o
}

func (m *Metrics) upstreamObserver(k upstreamSeries) prometheus.Observer {
	if o, ok := m.upstreamSeries.Load(k); ok {
		return o.(prometheus.Observer)
	}
	o := m.upstreamDuration.WithLabelValues(k.proxy, k.method, strconv.Itoa(k.status))
	m.upstreamSeries.Store(k, o)
	return o
}

// NewMetrics registers every family; the state gauges exist from the start.
func NewMetrics(version string, dashboard bool) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.proxyDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "doppel_proxy_request_duration_seconds", Help: "Requests on the proxy listener, every one of them (dropped and unresolved included), to their response headers.",
		Buckets: ProxyBuckets,
	}, []string{"proxy", "method", "status", "replace", "loss", "upstream_error"})
	m.upstreamDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "doppel_upstream_request_duration_seconds", Help: "Upstream exchanges, to the upstream's response headers.",
		Buckets: ProxyBuckets,
	}, []string{"proxy", "method", "status"})
	m.adminDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "doppel_admin_request_duration_seconds", Help: "Admin API requests, by route template.",
		Buckets: AdminBuckets,
	}, []string{"route", "method", "status"})
	m.loss = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_loss_total", Help: "Requests dropped by an injected loss.",
	}, []string{"proxy"})
	m.latency = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_latency_injected_total", Help: "Latency rolls that fired (whether or not anything was left to wait).",
	}, []string{"proxy"})
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_faults_total", Help: "Faults that fired, by kind: loss, latency, abort, hang, bandwidth.",
	}, []string{"proxy", "fault"})
	m.mockHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_mock_hits_total", Help: "Requests a mock was chosen to answer.",
	}, []string{"proxy", "mock"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "doppel_build_info", Help: "Always 1; the version is a label.",
	}, []string{"version"})
	dash := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "doppel_dashboard_info", Help: "Always 1; whether the dashboard is served is a label.",
	}, []string{"enabled"})
	m.lastError = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "doppel_proxy_last_error_timestamp_seconds", Help: "When the proxy listener last answered with an error code (Unix seconds).",
	}, []string{"code"})
	m.proxyMocks = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "doppel_proxy_mocks", Help: "Mocks per proxy in the configuration in force; a removed proxy is 0.",
	}, []string{"proxy"})
	m.tcpConnections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_tcp_connections_total", Help: "Connections a tcp proxy relayed, counted when they end; fault is the one that cut or held it (abort, hang), or empty.",
	}, []string{"proxy", "fault"})
	m.tcpBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_tcp_bytes_total", Help: "Bytes a tcp proxy relayed: direction up is from the client, down from the upstream.",
	}, []string{"proxy", "direction"})
	m.counterFallback = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "doppel_counter_fallback_total", Help: "Requests whose when counts were kept on this replica because the fleet's counters (the database) did not answer within 250 ms.",
	}, []string{"proxy"})
	m.reg.MustRegister(m.proxyDuration, m.upstreamDuration, m.adminDuration, m.loss, m.latency, m.faults, m.mockHits,
		build, dash, m.lastError, m.proxyMocks, m.tcpConnections, m.tcpBytes, m.counterFallback,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build.WithLabelValues(version).Set(1)
	dash.WithLabelValues(strconv.FormatBool(dashboard)).Set(1)
	m.lastError.WithLabelValues("").Set(0)
	return m
}

// ObserveConnection counts a tcp proxy's connection when it ends: the
// fault that cut or held it ("" for none), the faults that fired, and
// the bytes each way. Once per connection, not per byte.
func (m *Metrics) ObserveConnection(proxy, fault string, fired []string, up, down int64) {
	if m == nil {
		return
	}
	m.tcpConnections.WithLabelValues(proxy, fault).Inc()
	m.tcpBytes.WithLabelValues(proxy, "up").Add(float64(up))
	m.tcpBytes.WithLabelValues(proxy, "down").Add(float64(down))
	for _, f := range fired {
		m.faults.WithLabelValues(proxy, f).Inc()
	}
}

// ContentType is what /metrics answers: the text exposition format,
// exactly as 1.1 names it (client_golang's own handler adds an
// `escaping` parameter that scrapers written for 1.1 match against).
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the text exposition format; a registry that cannot be
// gathered is a 500, as client_golang's handler answers it.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		families, err := m.reg.Gather()
		if err != nil {
			http.Error(w, "metrics could not be gathered", http.StatusInternalServerError)
			return
		}
		var b bytes.Buffer
		for _, f := range families {
			if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
				http.Error(w, "metrics could not be encoded", http.StatusInternalServerError)
				return
			}
		}
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b.Bytes())
	})
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ObserveProxy records one proxied request.
func (m *Metrics) ObserveProxy(r *Exchange) {
	if m == nil {
		return
	}
	method := MethodLabel(r.Method)
	lost := r.Fired("loss")
	upstreamError := r.UpstreamFailed || (r.UpstreamAnswered && r.UpstreamStatus >= 500)
	m.proxyObserver(proxySeries{r.Proxy, method, r.Status, r.Mock != "", lost, upstreamError}).Observe(r.Duration.Seconds())
	if r.UpstreamAnswered {
		m.upstreamObserver(upstreamSeries{r.Proxy, method, r.UpstreamStatus}).Observe(r.UpstreamDuration.Seconds())
	}
	if r.Counter == "local" {
		m.counterFallback.WithLabelValues(r.Proxy).Inc()
	}
	if lost {
		m.loss.WithLabelValues(r.Proxy).Inc()
	}
	if r.Fired("latency") {
		m.latency.WithLabelValues(r.Proxy).Inc()
	}
	for _, f := range r.Faults {
		m.faults.WithLabelValues(r.Proxy, f).Inc()
	}
	if r.ErrorCode != "" {
		m.lastError.WithLabelValues(r.ErrorCode).Set(float64(time.Now().UnixNano()) / 1e9)
	}
}

// MockHit counts a request a mock was chosen for.
func (m *Metrics) MockHit(proxy, mock string) {
	if m != nil {
		m.mockHits.WithLabelValues(proxy, mock).Inc()
	}
}

// ObserveAdmin records one admin request by its route template.
func (m *Metrics) ObserveAdmin(route, method string, status int, d time.Duration) {
	if m != nil {
		m.adminDuration.WithLabelValues(route, MethodLabel(method), strconv.Itoa(status)).Observe(d.Seconds())
	}
}

// PublishMocks sets doppel_proxy_mocks for the configuration now in force:
// counts maps every proxy to its number of mocks; gone are proxies that
// left, set to 0 rather than keeping their last count.
func (m *Metrics) PublishMocks(counts map[string]int, gone []string) {
	if m == nil {
		return
	}
	for _, p := range gone {
		m.proxyMocks.WithLabelValues(p).Set(0)
	}
	for p, n := range counts {
		m.proxyMocks.WithLabelValues(p).Set(float64(n))
	}
}

// InstrumentAdmin wraps the admin listener's handler so that every request
// lands in the admin histogram under its route template.
func (m *Metrics) InstrumentAdmin(h http.Handler, route func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.ObserveAdmin(route(r), r.Method, sw.status, time.Since(began))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
