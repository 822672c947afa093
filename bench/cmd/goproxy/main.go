// Command goproxy is the "stock Go" baseline: a bare
// net/http/httputil.ReverseProxy whose Rewrite only calls SetURL (and
// SetXForwarded, which Doppel also does), over a Transport configured exactly
// like Doppel's internal/proxy.NewTransport, so the comparison measures
// Doppel's own work and not a different connection pool.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// newTransport mirrors internal/proxy.NewTransport field for field.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		DisableCompression:    true,
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:19001", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:19000/", "upstream URL")
	flag.Parse()

	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatalf("goproxy: bad -upstream: %v", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: newTransport(),
	}
	srv := &http.Server{Addr: *addr, Handler: rp}
	log.Fatal(srv.ListenAndServe())
}
