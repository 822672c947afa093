// Command loadgen is an open-loop, fixed-rate HTTP load generator.
//
// Request i is scheduled at start + i/rate whether or not earlier requests
// have completed (each runs in its own goroutine), and its latency is
// measured from that scheduled instant to the end of the response body. A
// stalled target therefore shows up in the percentiles instead of silently
// lowering the offered load (no coordinated omission). It prints one JSON
// object on stdout.
//
// The dispatcher waits with nanosleep(2) rather than time.Sleep: the Go
// runtime's timers wake up with millisecond granularity on Linux, which would
// add about 0.5 ms of the generator's own lag to every latency. What lag is
// left (the machine's scheduling noise) is reported as dispatch_lag_*.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/doppelproxy/doppel/bench/internal/openloop"
)

func main() {
	target := flag.String("url", "", "URL to GET")
	rate := flag.Float64("rate", 1000, "requests per second")
	dur := flag.Duration("duration", 5*time.Second, "measured duration")
	warm := flag.Duration("warmup", 500*time.Millisecond, "unmeasured lead-in at the same rate")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout")
	flag.Parse()
	if *target == "" || *rate <= 0 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -url, a positive -rate and -duration are required")
		os.Exit(2)
	}

	client := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}

	interval := time.Duration(float64(time.Second) / *rate)
	nWarm := int(*warm / interval)
	nMeas := int(*dur / interval)
	total := nWarm + nMeas

	lat := make([]time.Duration, nMeas) // -1 marks a failed request
	var non2xx, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup

	fire := func(i int, sched time.Time) {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *target, nil)
		resp, err := client.Do(req)
		measured := i >= nWarm
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		d := time.Since(sched)
		if !measured {
			return
		}
		switch {
		case err != nil:
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			lat[i-nWarm] = -1
		case resp.StatusCode < 200 || resp.StatusCode > 299:
			non2xx.Add(1)
			firstErr.CompareAndSwap(nil, "status "+resp.Status)
			lat[i-nWarm] = -1
		default:
			lat[i-nWarm] = d
		}
	}

	late := 0
	lags := make([]time.Duration, 0, nMeas)
	start := time.Now()
	for i := range total {
		sched := start.Add(time.Duration(i) * interval)
		if wait := time.Until(sched); wait > 0 {
			ts := syscall.NsecToTimespec(int64(wait))
			_ = syscall.Nanosleep(&ts, nil) // EINTR only shortens the wait
		}
		wg.Add(1)
		go fire(i, sched)
		if i >= nWarm {
			lag := time.Since(sched)
			lags = append(lags, lag)
			if lag > time.Millisecond {
				late++ // the generator itself fell behind by more than 1 ms
			}
		}
	}
	wg.Wait()
	slices.Sort(lags)

	ok := make([]time.Duration, 0, nMeas)
	for _, d := range lat {
		if d >= 0 {
			ok = append(ok, d)
		}
	}
	slices.Sort(ok)
	pctOf := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		k := int(p*float64(len(ds))+0.5) - 1
		k = max(0, min(k, len(ds)-1))
		return float64(ds[k].Nanoseconds()) / 1e3
	}
	pct := func(p float64) float64 { return pctOf(ok, p) }
	res := openloop.Result{
		URL: *target, Rate: *rate, Duration: dur.Seconds(),
		Sent: nMeas, OK: len(ok), Non2xx: int(non2xx.Load()), Errors: int(errs.Load()), Late: late,
		P50us: pct(0.50), P90us: pct(0.90), P99us: pct(0.99), P999us: pct(0.999), MaxUs: pct(1),
		LagP50us: pctOf(lags, 0.50), LagP99us: pctOf(lags, 0.99),
	}
	if s, _ := firstErr.Load().(string); s != "" {
		res.FirstError = s
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(res); err != nil {
		os.Exit(1)
	}
}
