//go:build pprof

package main

// A build for profiling (`go build -tags pprof ./cmd/doppel`, see
// docs/performance.md): with DOPPEL_PPROF=host:port in its environment,
// Doppel serves net/http/pprof there. Never in a release build: the tag
// is off by default and the address must be given.

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("DOPPEL_PPROF")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			fmt.Fprintf(os.Stderr, "doppel: DOPPEL_PPROF=%s: %v\n", addr, err)
		}
	}()
}
