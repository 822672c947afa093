// Command loadgen is an open-loop, fixed-rate HTTP/1.1 load generator.
//
// Request i is scheduled at start + i/rate whether or not earlier requests
// have completed, and its latency is measured from that scheduled instant to
// the end of the response body. A stalled target therefore shows up in the
// percentiles instead of silently lowering the offered load (no coordinated
// omission). It prints one JSON object on stdout.
//
// It speaks HTTP/1.1 itself, over keep-alive connections each served by one
// goroutine: a request is one write and, for a small answer, one read. With
// net/http's client (a goroutine per request, two per connection, channels
// between them) the generator cost about as much CPU per request as the
// proxy it measured, and at 8,000 requests a second with a one-second delay
// (8,000 connections in flight) it fell seconds behind its own schedule on
// the same two cores. A scheduled request takes an idle connection, or opens
// a new one while fewer than -conns are open, or waits for the next one to
// come free; the wait counts in its latency.
//
// The dispatcher waits with nanosleep(2) rather than time.Sleep: the Go
// runtime's timers wake up with millisecond granularity on Linux, which would
// add about 0.5 ms of the generator's own lag to every latency. What lag is
// left (the machine's scheduling noise) is reported as dispatch_lag_*.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/doppelproxy/doppel/bench/internal/openloop"
)

// headerList is a repeatable -header "Name: value" flag.
type headerList []string

func (h *headerList) String() string     { return fmt.Sprint(*h) }
func (h *headerList) Set(s string) error { *h = append(*h, s); return nil }

// job is one scheduled request.
type job struct {
	i     int
	sched time.Time
}

type run struct {
	addr     string
	request  []byte
	timeout  time.Duration
	nWarm    int
	lat      []time.Duration // -1 marks a failed request
	jobs     chan job
	idle     atomic.Int64 // workers waiting for a job
	open     atomic.Int64 // workers started (connections, open or being opened)
	peakOpen atomic.Int64
	inFlight atomic.Int64
	peakIn   atomic.Int64
	non2xx   atomic.Int64
	errs     atomic.Int64
	firstErr atomic.Value
	wg       sync.WaitGroup
}

func main() {
	target := flag.String("url", "", "http:// URL to GET")
	rate := flag.Float64("rate", 1000, "requests per second")
	dur := flag.Duration("duration", 5*time.Second, "measured duration")
	warm := flag.Duration("warmup", 500*time.Millisecond, "unmeasured lead-in at the same rate")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout, from its scheduled time")
	conns := flag.Int("conns", 20000, "most connections open at once")
	var headers headerList
	flag.Var(&headers, "header", `extra request header "Name: value" (repeatable)`)
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "http" || u.Host == "" || *rate <= 0 || *dur <= 0 || *conns < 1 {
		fmt.Fprintln(os.Stderr, "loadgen: an http:// -url, a positive -rate, -duration and -conns are required")
		os.Exit(2)
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: doppel-bench-loadgen\r\n", u.RequestURI(), u.Host)
	for _, h := range headers {
		fmt.Fprintf(&req, "%s\r\n", h)
	}
	req.WriteString("\r\n")

	interval := time.Duration(float64(time.Second) / *rate)
	nWarm := int(*warm / interval)
	nMeas := int(*dur / interval)
	total := nWarm + nMeas
	r := &run{
		addr: u.Host, request: req.Bytes(), timeout: *timeout, nWarm: nWarm,
		lat:  make([]time.Duration, nMeas),
		jobs: make(chan job, total),
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
		if r.idle.Load() == 0 && r.open.Load() < int64(*conns) {
			r.startWorker()
		}
		r.jobs <- job{i, sched}
		if i >= nWarm {
			lag := time.Since(sched)
			lags = append(lags, lag)
			if lag > time.Millisecond {
				late++ // the generator itself fell behind by more than 1 ms
			}
		}
	}
	close(r.jobs)
	r.wg.Wait()
	slices.Sort(lags)

	ok := make([]time.Duration, 0, nMeas)
	for _, d := range r.lat {
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
		Sent: nMeas, OK: len(ok), Non2xx: int(r.non2xx.Load()), Errors: int(r.errs.Load()), Late: late,
		P50us: pct(0.50), P90us: pct(0.90), P99us: pct(0.99), P999us: pct(0.999), MaxUs: pct(1),
		LagP50us: pctOf(lags, 0.50), LagP99us: pctOf(lags, 0.99),
		PeakInFlight: int(r.peakIn.Load()), PeakConns: int(r.peakOpen.Load()),
	}
	if s, _ := r.firstErr.Load().(string); s != "" {
		res.FirstError = s
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(1)
	}
}

func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func (r *run) startWorker() {
	raise(&r.peakOpen, r.open.Add(1))
	r.wg.Go(r.worker)
}

// worker serves jobs over one connection at a time, opening a new one after
// an error or a Connection: close.
func (r *run) worker() {
	defer r.open.Add(-1)
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		r.idle.Add(1)
		j, more := <-r.jobs
		r.idle.Add(-1)
		if !more {
			return
		}
		raise(&r.peakIn, r.inFlight.Add(1))
		status, keep, err := r.do(&c, &br, j.sched.Add(r.timeout))
		r.inFlight.Add(-1)
		if err != nil || !keep {
			if c != nil {
				c.Close()
				c = nil
			}
		}
		d := time.Since(j.sched)
		if j.i < r.nWarm {
			continue
		}
		k := j.i - r.nWarm
		switch {
		case err != nil:
			r.errs.Add(1)
			r.firstErr.CompareAndSwap(nil, err.Error())
			r.lat[k] = -1
		case status < 200 || status > 299:
			r.non2xx.Add(1)
			r.firstErr.CompareAndSwap(nil, "status "+strconv.Itoa(status))
			r.lat[k] = -1
		default:
			r.lat[k] = d
		}
	}
}

var errNoLength = errors.New("an answer without Content-Length (loadgen reads only those)")

// do sends one request on *c (dialing first if it is nil) and reads the
// whole answer.
func (r *run) do(c *net.Conn, br **bufio.Reader, deadline time.Time) (status int, keep bool, err error) {
	if *c == nil {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.Dial("tcp", r.addr)
		if err != nil {
			return 0, false, err
		}
		*c = conn
		if *br == nil {
			*br = bufio.NewReaderSize(conn, 16<<10)
		} else {
			(*br).Reset(conn)
		}
	}
	conn, rd := *c, *br
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, false, err
	}
	if _, err := conn.Write(r.request); err != nil {
		return 0, false, err
	}
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	length := int64(-1)
	keep = line[7] == '1'
	for {
		h, err := rd.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return status, false, fmt.Errorf("bad header line %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return status, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	if length < 0 {
		return status, false, errNoLength
	}
	if _, err := io.CopyN(io.Discard, rd, length); err != nil {
		return status, false, err
	}
	return status, keep, nil
}
