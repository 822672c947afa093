// Command h2bench is the benchmark's closed-loop client for HTTP/2: -conns
// connections, each carrying -streams requests at once, for -d, over TLS
// (https URLs, ALPN h2) or in cleartext with prior knowledge (http URLs).
// With -proto 1 it speaks HTTP/1.1 instead, one request at a time per
// connection, so that the two protocols are measured by the same client.
// It prints one JSON object: requests, req/s, p50 and p99 in µs, errors,
// non-2xx answers.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

type result struct {
	Requests int64   `json:"requests"`
	RPS      float64 `json:"rps"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	Errors   int64   `json:"errors"`
	Non2xx   int64   `json:"non2xx"`
	First    string  `json:"first_error,omitempty"`
}

func main() {
	url := flag.String("url", "", "the URL to GET")
	proto := flag.Int("proto", 2, "1 for HTTP/1.1, 2 for HTTP/2")
	conns := flag.Int("conns", 2, "connections")
	streams := flag.Int("streams", 32, "requests in flight per connection (HTTP/2)")
	d := flag.Duration("d", 5*time.Second, "how long to run")
	flag.Parse()
	if *url == "" || (*proto != 1 && *proto != 2) || *conns < 1 || *streams < 1 {
		fmt.Fprintln(os.Stderr, "usage: h2bench -url URL [-proto 1|2] [-conns N] [-streams M] [-d DURATION]")
		os.Exit(2)
	}
	res, err := run(*url, *proto, *conns, *streams, *d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "h2bench:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

// transport is one connection's: its own pool, so that N of them are N
// connections whatever the protocol.
func transport(proto int) *http.Transport {
	t := &http.Transport{
		// The benchmark's own certificate; nothing here is trusted.
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true},
		DisableCompression: true,
		MaxConnsPerHost:    1,
		Protocols:          new(http.Protocols),
	}
	if proto == 2 {
		t.Protocols.SetHTTP2(true)
		t.Protocols.SetUnencryptedHTTP2(true)
	} else {
		t.Protocols.SetHTTP1(true)
	}
	return t
}

func run(url string, proto, conns, streams int, d time.Duration) (result, error) {
	perConn := streams
	if proto == 1 {
		perConn = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu      sync.Mutex
		lat     []time.Duration
		res     result
		wg      sync.WaitGroup
		started = time.Now()
	)
	for range conns {
		c := &http.Client{Transport: transport(proto)}
		for range perConn {
			wg.Go(func() {
				var mine []time.Duration
				var errs, non2xx int64
				first := ""
				for ctx.Err() == nil {
					t0 := time.Now()
					req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
					resp, err := c.Do(req)
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if err == nil && resp.ProtoMajor != proto {
							err = fmt.Errorf("answered in %s, not HTTP/%d", resp.Proto, proto)
						}
					}
					if ctx.Err() != nil {
						break // the run ended during this request: not counted
					}
					if err != nil {
						errs++
						if first == "" {
							first = err.Error()
						}
						continue
					}
					if resp.StatusCode/100 != 2 {
						non2xx++
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				res.Errors += errs
				res.Non2xx += non2xx
				if res.First == "" {
					res.First = first
				}
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(started)
	if len(lat) == 0 {
		return res, errors.New("no request completed: " + res.First)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	res.Requests = int64(len(lat))
	res.RPS = float64(len(lat)) / elapsed.Seconds()
	res.P50us, res.P99us = pct(0.50), pct(0.99)
	return res, nil
}
