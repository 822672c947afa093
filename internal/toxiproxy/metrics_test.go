package toxiproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/doppelproxy/doppel/internal/tcp"
)

// scrape reads s's /metrics: each family's type, and each series'
// labels (name=value, sorted, comma-joined) and value.
func scrape(t *testing.T, s http.Handler) (map[string]string, map[string]map[string]float64) {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	code, h, body := w.Code, w.Result().Header, w.Body.String()
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s %.300s", code, h.Get("Content-Type"), body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%v in\n%s", err, body)
	}
	types, values := map[string]string{}, map[string]map[string]float64{}
	for name, f := range families {
		types[name] = f.GetType().String()
		values[name] = map[string]float64{}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			values[name][strings.Join(labels, ",")] = v
		}
	}
	return types, values
}

// Toxiproxy serves /metrics only with -proxy-metrics or -runtime-metrics:
// without either, there is no such path.
func TestMetricsAreServedOnlyWhenAsked(t *testing.T) {
	code, h, body := rawCall(t, newServer(t), "GET", "/metrics", "")
	if code != 404 || h.Get("X-Toxiproxy-Request-Id") != "" {
		t.Errorf("GET /metrics unasked: %d %q, want 404 without a request id", code, body)
	}
}

// Toxiproxy's proxy metrics: toxiproxy_proxy_received_bytes_total and
// toxiproxy_proxy_sent_bytes_total, counters by direction, proxy,
// listener and upstream; received is what a direction read, sent what it
// wrote, so a toxic that drops bytes tells them apart.
func TestProxyMetricsAreToxiproxys(t *testing.T) {
	s := &Server{ProxyMetrics: true}
	t.Cleanup(s.Close)
	up := echoUpstream(t)
	p := makeProxy(t, s, "db", "127.0.0.1:0", up)
	c := dialProxy(t, p.Listen)
	echoes(t, c, "hello")
	_ = c.Close()
	// A connection the proxy could not take upstream counts nothing.
	nowhere := makeProxy(t, s, "nowhere", "127.0.0.1:0", "127.0.0.1:"+freePort(t))
	// The relay resets it, maybe before the dial returns.
	if c, err := net.Dial("tcp", nowhere.Listen); err == nil {
		_, _ = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	// Dropped on the way up: read, never sent.
	if code, body := call(t, s, "POST", "/proxies/db/toxics", `{"type":"timeout","stream":"upstream"}`); code != 200 {
		t.Fatalf("toxic: %d %s", code, body)
	}
	c = dialProxy(t, p.Listen)
	if _, err := c.Write([]byte("dropped")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // for the relay to read them
	// Disabled, the proxy has every record in.
	call(t, s, "POST", "/proxies/db", `{"enabled":false}`)
	call(t, s, "DELETE", "/proxies/nowhere", "")

	types, values := scrape(t, s)
	for _, name := range []string{"toxiproxy_proxy_received_bytes_total", "toxiproxy_proxy_sent_bytes_total"} {
		if types[name] != "COUNTER" {
			t.Errorf("%s is %q, want COUNTER", name, types[name])
		}
	}
	labels := func(dir string) string {
		return "direction=" + dir + ",listener=" + p.Listen + ",proxy=db,upstream=" + up
	}
	want := map[string]map[string]float64{
		"toxiproxy_proxy_received_bytes_total": {labels("upstream"): 12, labels("downstream"): 5},
		"toxiproxy_proxy_sent_bytes_total":     {labels("upstream"): 5, labels("downstream"): 5},
	}
	for name, series := range want {
		if len(values[name]) != len(series) {
			t.Errorf("%s: %v, want %v", name, values[name], series)
		}
		for l, v := range series {
			if got, ok := values[name][l]; !ok || got != v {
				t.Errorf("%s{%s} = %v (%v), want %v", name, l, got, ok, v)
			}
		}
	}
	if _, ok := values["promhttp_metric_handler_errors_total"]; !ok {
		t.Error("promhttp_metric_handler_errors_total is not served, as Toxiproxy's handler serves it")
	}
	if _, ok := values["go_goroutines"]; ok {
		t.Error("runtime metrics are served without being asked for")
	}
}

// Runtime metrics alone: the Go runtime's, the build's and the
// process's, and no proxy's.
func TestRuntimeMetricsAreToxiproxys(t *testing.T) {
	s := &Server{RuntimeMetrics: true}
	t.Cleanup(s.Close)
	p := makeProxy(t, s, "db", "127.0.0.1:0", echoUpstream(t))
	c := dialProxy(t, p.Listen)
	echoes(t, c, "hello")
	call(t, s, "DELETE", "/proxies/db", "")
	types, _ := scrape(t, s)
	for name, typ := range map[string]string{"go_goroutines": "GAUGE", "go_build_info": "GAUGE", "process_cpu_seconds_total": "COUNTER"} {
		if types[name] != typ {
			t.Errorf("%s is %q, want %s", name, types[name], typ)
		}
	}
	for name := range types {
		if strings.HasPrefix(name, "toxiproxy_") {
			t.Errorf("%s is served without proxy metrics", name)
		}
	}
}

// The series of proxies no longer listening are kept, up to maxRetired,
// the oldest going first; those of a proxy listening again are kept.
func TestRetiredSeriesAreBounded(t *testing.T) {
	m := newMetrics(true, false)
	kept := series{"kept", "127.0.0.1:1", "127.0.0.1:2"}
	m.use(kept)
	m.count(kept, tcp.Record{ReadUp: 1})
	m.retire(kept)
	m.use(kept) // listening again
	for i := range maxRetired + 10 {
		s := series{fmt.Sprintf("p%d", i), "127.0.0.1:1", "127.0.0.1:2"}
		m.use(s)
		m.count(s, tcp.Record{ReadUp: 1, Up: 1})
		m.retire(s)
	}
	_, values := scrape(t, m.handler)
	received, sent := values["toxiproxy_proxy_received_bytes_total"], values["toxiproxy_proxy_sent_bytes_total"]
	if len(received) != 2*maxRetired+2 || len(sent) != 2*maxRetired+2 {
		t.Errorf("%d received and %d sent series, want %d: two of each of the %d newest retired, and the kept proxy's two", len(received), len(sent), 2*maxRetired+2, maxRetired)
	}
	at := func(dir, proxy string) string {
		return "direction=" + dir + ",listener=127.0.0.1:1,proxy=" + proxy + ",upstream=127.0.0.1:2"
	}
	if v, ok := received[at("upstream", "kept")]; !ok || v != 1 {
		t.Errorf("the series of a proxy listening again: %v, %v; want 1", v, ok)
	}
	if _, ok := received[at("upstream", "p9")]; ok {
		t.Error("the series of one of the oldest retired is kept")
	}
	if v, ok := sent[at("upstream", fmt.Sprintf("p%d", maxRetired+9))]; !ok || v != 1 {
		t.Errorf("the series of the newest retired: %v, %v; want 1", v, ok)
	}
}

// A record of a connection that ends before its relay is known to be
// bound waits for it, and is counted under the address bound.
func TestARecordWaitsForTheListener(t *testing.T) {
	m := newMetrics(true, false)
	var got []tcp.Record
	report, bound := m.relayReport("db", "127.0.0.1:2", func(r tcp.Record) { got = append(got, r) })
	done := make(chan struct{})
	go func() {
		report(tcp.Record{ReadDown: 3})
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	bound("127.0.0.1:1")
	<-done
	_, values := scrape(t, m.handler)
	if v := values["toxiproxy_proxy_received_bytes_total"]["direction=downstream,listener=127.0.0.1:1,proxy=db,upstream=127.0.0.1:2"]; v != 3 || len(got) != 1 {
		t.Errorf("received %v under the listener bound, %d records passed on; want 3 and 1: %v", v, len(got), values)
	}
}
