// Command upstream is the origin server every benchmark target sits in front
// of: GET /small answers about 100 bytes, GET /large exactly 1 MiB, both with
// a Content-Length and keep-alive (net/http's default); GET /slow answers
// /small's body after 50 ms, the backend of the exact-delay run.
package main

import (
	"bytes"
	"flag"
	"log"
	"net/http"
	"strconv"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:19000", "listen address")
	flag.Parse()

	small := []byte(`{"status":"ok","service":"bench-upstream","payload":"0123456789abcdefghijklmnopqrstuvwxyzABCDEF"}` + "\n")
	large := bytes.Repeat([]byte("0123456789abcdef"), 1<<20/16)

	serve := func(body []byte, ctype string) http.HandlerFunc {
		n := strconv.Itoa(len(body))
		return func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["Content-Type"] = []string{ctype}
			h["Content-Length"] = []string{n}
			w.WriteHeader(http.StatusOK)
			if r.Method != http.MethodHead {
				_, _ = w.Write(body)
			}
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/small", serve(small, "application/json"))
	mux.Handle("/large", serve(large, "application/octet-stream"))
	quick := serve(small, "application/json")
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		quick(w, r)
	})

	srv := &http.Server{Addr: *addr, Handler: mux}
	log.Fatal(srv.ListenAndServe())
}
