package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
)

// TestMetricsAndCompressionThroughTheBinary: /metrics on the admin
// listener carries the state gauges and the requests served; admin answers
// are compressed as asked; the proxy listener never compresses.
func TestMetricsAndCompressionThroughTheBinary(t *testing.T) {
	t.Parallel()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("plain upstream text ", 100))
	})
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("zeta", up.URL, ""))
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	proxyAddr := p.waitServing()
	adminAddr := lineField(p.waitLine("admin", 10*time.Second, func(l string) bool { return lineMsg(l) == "the admin API is listening" }), "admin_addr")

	noDecompress := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	fetch := func(url, accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		res, err := noDecompress.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r io.Reader = res.Body
		switch res.Header.Get("Content-Encoding") {
		case "br":
			r = brotli.NewReader(res.Body)
		case "gzip":
			r, _ = gzip.NewReader(res.Body)
		}
		b, _ := io.ReadAll(r)
		return res, string(b)
	}

	res, body := fetch("http://"+proxyAddr+"/x", "br, gzip")
	if res.Header.Get("Content-Encoding") != "" || !strings.HasPrefix(body, "plain upstream text") {
		t.Fatalf("the proxy listener compressed: %v", res.Header)
	}
	res, body = fetch("http://"+adminAddr+"/metrics", "gzip, br")
	if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "br" {
		t.Fatalf("/metrics: %d %v", res.StatusCode, res.Header)
	}
	// 1.1's type, exactly: scrapers written for it compare the whole value.
	if ct := res.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("/metrics Content-Type %q", ct)
	}
	for _, want := range []string{
		`doppel_build_info{version="`,
		`doppel_dashboard_info{enabled="true"} 1`,
		`doppel_proxy_last_error_timestamp_seconds{code=""} 0`,
		`doppel_proxy_mocks{proxy="zeta"} 0`,
		`doppel_proxy_request_duration_seconds_count{loss="0",method="GET",proxy="zeta",replace="0",status="200",upstream_error="0"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// 1.1's bucket ladder, to 60 s, for both request histograms.
	for _, name := range []string{"doppel_proxy_request_duration_seconds_bucket", "doppel_upstream_request_duration_seconds_bucket"} {
		var les []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `proxy="zeta"`) {
				i := strings.Index(line, `le="`)
				les = append(les, line[i+4:i+4+strings.Index(line[i+4:], `"`)])
			}
		}
		if got, want := strings.Join(les, " "), "0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 15 30 60 +Inf"; got != want {
			t.Errorf("%s buckets %q, want %q", name, got, want)
		}
	}
	res, body = fetch("http://"+adminAddr+"/api/v1/status", "gzip")
	if res.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(body, `"revision"`) {
		t.Fatalf("status: %v %s", res.Header, body)
	}
	res, body = fetch("http://"+adminAddr+"/metrics", "")
	if res.Header.Get("Content-Encoding") != "" || !strings.Contains(body, "doppel_admin_request_duration_seconds_count{method=\"GET\",route=\"/api/v1/status\",status=\"200\"} 1") {
		t.Fatalf("the admin histogram by route template: %s", res.Header)
	}
	req, _ := http.NewRequest("POST", "http://"+adminAddr+"/metrics", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 405 || r.Header.Get("Allow") == "" {
		t.Fatalf("POST /metrics: %v %v", r, err)
	}
	p.signal(syscall.SIGTERM)
	p.waitExit(exitTimeout)
}
