package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestStateGaugesFromStartup(t *testing.T) {
	m := NewMetrics("9.9.9", true)
	out := scrape(t, m)
	for _, want := range []string{
		`doppel_build_info{version="9.9.9"} 1`,
		`doppel_dashboard_info{enabled="true"} 1`,
		`doppel_proxy_last_error_timestamp_seconds{code=""} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	m.PublishMocks(map[string]int{"zeta": 3}, nil)
	m.PublishMocks(map[string]int{"alpha": 1}, []string{"zeta"})
	out = scrape(t, m)
	if !strings.Contains(out, `doppel_proxy_mocks{proxy="zeta"} 0`) || !strings.Contains(out, `doppel_proxy_mocks{proxy="alpha"} 1`) {
		t.Errorf("mocks per proxy:\n%s", out)
	}
}

func TestProxyObservations(t *testing.T) {
	m := NewMetrics("v", false)
	m.ObserveProxy(&Exchange{Proxy: "zeta", Method: "BREW", Status: 503, Faults: []string{"loss", "latency"}, ErrorCode: "LOSS_INJECTED", Duration: 3 * time.Millisecond})
	m.ObserveProxy(&Exchange{Proxy: "zeta", Method: "GET", Status: 502, UpstreamFailed: true, UpstreamAnswered: true, UpstreamStatus: 502, Duration: time.Second, UpstreamDuration: time.Second})
	m.ObserveProxy(&Exchange{Proxy: "", Method: "GET", Status: 404, ErrorCode: "PROXY_NOT_RESOLVED"})
	m.MockHit("zeta", "mm")
	out := scrape(t, m)
	for _, want := range []string{
		`doppel_proxy_request_duration_seconds_count{loss="1",method="OTHER",proxy="zeta",replace="0",status="503",upstream_error="0"} 1`,
		`doppel_proxy_request_duration_seconds_count{loss="0",method="GET",proxy="zeta",replace="0",status="502",upstream_error="1"} 1`,
		`doppel_proxy_request_duration_seconds_count{loss="0",method="GET",proxy="",replace="0",status="404",upstream_error="0"} 1`,
		`doppel_proxy_request_duration_seconds_bucket{loss="0",method="GET",proxy="zeta",replace="0",status="502",upstream_error="1",le="60"} 1`,
		`doppel_upstream_request_duration_seconds_count{method="GET",proxy="zeta",status="502"} 1`,
		`doppel_loss_total{proxy="zeta"} 1`,
		`doppel_latency_injected_total{proxy="zeta"} 1`,
		`doppel_mock_hits_total{mock="mm",proxy="zeta"} 1`,
		`doppel_proxy_last_error_timestamp_seconds{code="LOSS_INJECTED"}`,
		`doppel_proxy_last_error_timestamp_seconds{code="PROXY_NOT_RESOLVED"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(out, "path=") {
		t.Error("a path label exists")
	}
}

func TestAdminObservationsUseRouteTemplates(t *testing.T) {
	m := NewMetrics("v", true)
	h := m.InstrumentAdmin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }),
		func(*http.Request) string { return "/api/v1/proxies/{name}" })
	for _, p := range []string{"/api/v1/proxies/a", "/api/v1/proxies/b"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	if out := scrape(t, m); !strings.Contains(out, `doppel_admin_request_duration_seconds_count{method="GET",route="/api/v1/proxies/{name}",status="404"} 2`) {
		t.Errorf("admin histogram:\n%s", out)
	}
}

// BenchmarkObserveProxy is what every forwarded request costs the metrics,
// from as many goroutines as there are cores.
func BenchmarkObserveProxy(b *testing.B) {
	m := NewMetrics("test", false)
	r := &Exchange{Proxy: "zeta", Method: "GET", Status: 200, Duration: 1234567, UpstreamAnswered: true, UpstreamStatus: 200, UpstreamDuration: 1000000}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveProxy(r)
		}
	})
}
