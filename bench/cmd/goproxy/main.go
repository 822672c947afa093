// Command goproxy is the "stock Go" baseline: a bare
// net/http/httputil.ReverseProxy whose Rewrite only calls SetURL (and
// SetXForwarded, which Doppel also does), over a Transport configured exactly
// by Doppel's own internal/proxy.NewTransport, so the comparison measures
// Doppel's own work and not a different connection pool.
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/doppelproxy/doppel/internal/proxy"
)

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
		Transport: proxy.NewTransport(),
	}
	srv := &http.Server{Addr: *addr, Handler: rp}
	log.Fatal(srv.ListenAndServe())
}
