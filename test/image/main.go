// Command image is the host side of scripts/image-test.sh: an upstream for
// the containerised Doppel to proxy to, and free ports for its listeners.
//
//	image -ports 2                   prints two free loopback ports, one a line
//	image -listen 127.0.0.1:0 -port-file F
//	                                 serves GET /orders and GET /slow?ms=N,
//	                                 writing its port to F once it listens
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	ports := flag.Int("ports", 0, "print this many free loopback ports and exit")
	listen := flag.String("listen", "127.0.0.1:0", "the upstream's address")
	portFile := flag.String("port-file", "", "where to write the upstream's port")
	flag.Parse()
	if *ports > 0 {
		printFreePorts(*ports)
		return
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		// Written whole, then renamed, so a reader never sees half a port.
		tmp := *portFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *portFile); err != nil {
			log.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"from":"upstream","path":%q}`+"\n", r.URL.Path)
	})
	// The request in flight when the container is told to stop.
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		fmt.Fprintf(w, "slow answer after %d ms\n", ms)
	})
	log.Fatal(http.Serve(ln, mux))
}

// printFreePorts holds every listener open until all are chosen, so the
// ports differ; another process may still take one before Doppel binds it.
func printFreePorts(n int) {
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		lns = append(lns, ln)
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
}
