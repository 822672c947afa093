package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/bench/internal/openloop"
)

// wrkRun is one closed-loop wrk measurement of one target.
type wrkRun struct {
	RPS       float64
	Requests  int64
	P50, P99  time.Duration
	SockErrs  int64
	Non2xx    int64
	CPU       time.Duration // measured process tree, during the run
	CPUPerReq float64       // µs
	RSSPeak   int64         // bytes, sampled every 100 ms during the run
}

var (
	reRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reReqs    = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in `)
	rePct     = regexp.MustCompile(`(?m)^\s*(50|99)%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
	reSockErr = regexp.MustCompile(`(?m)Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
	reNon2xx  = regexp.MustCompile(`(?m)Non-2xx or 3xx responses: ([0-9]+)`)
)

func parseWrkDuration(num, unit string) (time.Duration, error) {
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, err
	}
	mult := map[string]float64{"us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}[unit]
	return time.Duration(f * mult), nil
}

// parseWrk reads wrk's --latency report.
func parseWrk(out string) (wrkRun, error) {
	var r wrkRun
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec line in wrk output:\n%s", out)
	}
	r.RPS, _ = strconv.ParseFloat(m[1], 64)
	if m = reReqs.FindStringSubmatch(out); m == nil {
		return r, fmt.Errorf("no request count in wrk output:\n%s", out)
	}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	for _, pm := range rePct.FindAllStringSubmatch(out, -1) {
		d, err := parseWrkDuration(pm[2], pm[3])
		if err != nil {
			return r, fmt.Errorf("bad latency %q in wrk output", pm[0])
		}
		if pm[1] == "50" {
			r.P50 = d
		} else {
			r.P99 = d
		}
	}
	if r.P50 == 0 || r.P99 == 0 {
		return r, fmt.Errorf("no 50%%/99%% latency lines in wrk output (was --latency given?):\n%s", out)
	}
	if m = reSockErr.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.SockErrs += n
		}
	}
	if m = reNon2xx.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return r, nil
}

// measureWrk runs wrk against url while accounting the CPU and RSS of the
// process tree rooted at pid.
// sampleRSS samples the resident memory of the processes every 100 ms
// until the returned function is called, which returns the peak.
func sampleRSS(tree []int) (stop func() int64) {
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if r := rssOf(tree); r > peak {
				peak = r
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// measureClient runs a load generator (argv) against pid's server for d:
// parse reads its output; the server's CPU and peak RSS over the run are
// added to what it says.
func measureClient(ctx context.Context, d time.Duration, pid int, parse func(string) (wrkRun, error), argv ...string) (wrkRun, error) {
	cpu0, err := treeCPU(pid)
	if err != nil {
		return wrkRun{}, err
	}
	stop := sampleRSS(processTree(pid))
	cctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	peak := stop()
	cpu1, cerr := treeCPU(pid)
	if runErr != nil {
		if ctx.Err() != nil {
			return wrkRun{}, ctx.Err()
		}
		return wrkRun{}, fmt.Errorf("%s: %v\n%s%s", strings.Join(argv, " "), runErr, out.String(), errb.String())
	}
	if cerr != nil {
		return wrkRun{}, fmt.Errorf("measured process died during the run: %w", cerr)
	}
	r, err := parse(out.String())
	if err != nil {
		return r, err
	}
	r.CPU = cpu1 - cpu0
	if r.Requests > 0 {
		r.CPUPerReq = float64(r.CPU.Microseconds()) / float64(r.Requests)
	}
	r.RSSPeak = peak
	return r, nil
}

func measureWrk(ctx context.Context, cfg *config, url, header string, d time.Duration, pid int) (wrkRun, error) {
	secs := max(1, int((d+time.Second/2)/time.Second))
	argv := []string{cfg.wrk, "-t" + strconv.Itoa(cfg.threads), "-c" + strconv.Itoa(cfg.conns), "-d" + strconv.Itoa(secs) + "s", "--latency"}
	if header != "" {
		argv = append(argv, "-H", header)
	}
	return measureClient(ctx, d, pid, parseWrk, append(argv, url)...)
}

// measureH2bench is measureWrk with h2bench speaking HTTP/proto: as many
// requests in flight as wrk's connections, on that many HTTP/1.1
// connections or over two HTTP/2 ones.
func measureH2bench(ctx context.Context, cfg *config, url string, proto int, d time.Duration, pid int) (wrkRun, error) {
	conns, streams := cfg.conns, 1
	if proto == 2 {
		conns, streams = 2, max(1, cfg.conns/2)
	}
	return measureClient(ctx, d, pid, parseH2bench, cfg.bin("h2bench"), "-url", url, "-proto", strconv.Itoa(proto),
		"-conns", strconv.Itoa(conns), "-streams", strconv.Itoa(streams), "-d", d.String())
}

// parseH2bench reads h2bench's JSON line.
func parseH2bench(out string) (wrkRun, error) {
	var res struct {
		Requests int64   `json:"requests"`
		RPS      float64 `json:"rps"`
		P50us    float64 `json:"p50_us"`
		P99us    float64 `json:"p99_us"`
		Errors   int64   `json:"errors"`
		Non2xx   int64   `json:"non2xx"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return wrkRun{}, fmt.Errorf("h2bench: %v: %s", err, out)
	}
	return wrkRun{RPS: res.RPS, Requests: res.Requests, SockErrs: res.Errors, Non2xx: res.Non2xx,
		P50: time.Duration(res.P50us * 1e3), P99: time.Duration(res.P99us * 1e3)}, nil
}

func runLoadgen(ctx context.Context, cfg *config, url, header string, rate float64) (openloop.Result, error) {
	lctx, cancel := context.WithTimeout(ctx, cfg.rateDur+30*time.Second)
	defer cancel()
	args := []string{"-url", url,
		"-rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"-duration", cfg.rateDur.String(),
		"-warmup", cfg.rateWarm.String(),
		"-timeout", "10s"}
	if header != "" {
		args = append(args, "-header", header)
	}
	cmd := exec.CommandContext(lctx, cfg.bin("loadgen"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return openloop.Result{}, ctx.Err()
		}
		return openloop.Result{}, fmt.Errorf("loadgen %s: %v\n%s", url, err, strings.TrimSpace(errb.String()))
	}
	var r openloop.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("loadgen %s: unreadable result %q: %v", url, out.String(), err)
	}
	return r, nil
}
