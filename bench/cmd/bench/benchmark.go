package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/bench/internal/openloop"
)

type caseKey struct{ target, path string }

type benchCase struct {
	key    caseKey
	srv    *server
	url    string
	header string // one "Name: value" sent with every request, if any
	// proto is 1 or 2 for a run of h2bench speaking HTTP/1.1 or HTTP/2
	// (TLS for https URLs, h2c for http ones); 0 for wrk.
	proto int
}

// scaleCase is an open-loop run at its own rate against a server started
// for it: the delays at scale (doppel-delay, and Toxiproxy with a latency
// toxic beside it) and the exact-delay run.
type scaleCase struct {
	name   string // shown in the report
	server string // "doppel" or "toxiproxy"
	start  func(context.Context) (*server, error)
	url    string
	header string
	rate   float64
	target time.Duration // the delay every answer waits for
	// journal: the run also reads each request's duration as Doppel
	// measured it from doppel-delay's journal (proxy exact).
	journal bool
	// idle and stalled hostile connections are held open during the run
	// (openHostile).
	idle, stalled int
}

// scaleRun is one of them: loadgen's result and what the server spent.
type scaleRun struct {
	openloop.Result
	CPUPerReq float64 // µs, the server's CPU over the requests sent
	RSSPeak   int64
	RSSIdle   int64 // the fresh server's, before the run
	// Doppel's own measure of the measured requests (journal runs): the
	// duration from the request read to the answer written.
	DoppelP50us float64 `json:",omitempty"`
	DoppelP99us float64 `json:",omitempty"`
}

type benchmark struct {
	cfg        *config
	sup        *supervisor
	fl         *fleet
	cases      []benchCase // wrk runs of one round, in order
	rateCases  []benchCase // open-loop runs of one round, in order
	scaleCases []scaleCase // then these
	wrk        map[caseKey][]wrkRun
	scale      map[string][]scaleRun
	lg         map[string][]openloop.Result
	roundsDone int
	perRound   time.Duration
	problems   []string
}

func newBenchmark(cfg *config, fl *fleet, sup *supervisor) *benchmark {
	b := &benchmark{cfg: cfg, fl: fl, sup: sup, wrk: map[caseKey][]wrkRun{}, lg: map[string][]openloop.Result{}, scale: map[string][]scaleRun{}}
	add := func(list *[]benchCase, s *server, path string) {
		c := benchCase{key: caseKey{s.name, path}, srv: s, url: s.base + path}
		if s == fl.doppelSession {
			c.header = fl.sessionHead
		}
		*list = append(*list, c)
	}
	// The feature costs: each feature's Doppel right after the plain one,
	// on /small and the mock path.
	features := func(path string) {
		add(&b.cases, fl.doppelNoJournal, path)
		add(&b.cases, fl.doppel, path)
		add(&b.cases, fl.doppelSession, path)
		add(&b.cases, fl.doppelReceipts, path)
		if path == mockPath {
			add(&b.cases, fl.doppelWhen, mockPath)
		}
	}
	if cfg.onlyDoppel() {
		features("/small")
		features(mockPath)
		return b
	}
	if cfg.onlyDelays() {
		b.addScaleCases()
		return b
	}
	// The journal-off Doppel runs right before the default one, on /small
	// and the mock path only: the journal's cost is read from that pair.
	for _, s := range []*server{fl.upstream, fl.nginx, fl.goproxy, fl.toxiproxy, fl.doppelTCP, fl.doppelInfo} {
		add(&b.cases, s, "/small")
	}
	features("/small")
	// /large after /small: the RSS-flat target compares the two peaks.
	for _, s := range []*server{fl.upstream, fl.nginx, fl.goproxy, fl.toxiproxy, fl.doppelTCP, fl.doppelNoJournal, fl.doppel, fl.doppelInfo} {
		add(&b.cases, s, "/large")
	}
	// The protocols: Doppel forwarding over HTTP/1.1 and HTTP/2, in
	// cleartext and over TLS, all measured by one Go client (h2bench)
	// so that only the protocol differs.
	for _, path := range []string{"/small", "/large"} {
		for _, pc := range []struct {
			s     *server
			name  string
			proto int
		}{{fl.doppel, "doppel h1", 1}, {fl.doppel, "doppel h2c", 2}, {fl.doppelTLS, "doppel-tls h1", 1}, {fl.doppelTLS, "doppel-tls h2", 2}} {
			b.cases = append(b.cases, benchCase{key: caseKey{pc.name, path}, srv: pc.s, url: pc.s.base + path, proto: pc.proto})
		}
	}
	for _, s := range []*server{fl.doppelInfo, fl.mountebank, fl.nginxRet} {
		add(&b.cases, s, mockPath)
	}
	features(mockPath)
	for _, s := range []*server{fl.upstream, fl.goproxy, fl.doppel, fl.doppelInfo} {
		add(&b.rateCases, s, "/small")
	}
	b.addScaleCases()
	return b
}

// addScaleCases adds the delay runs: the exact one, then at each rate
// Doppel's and Toxiproxy's.
func (b *benchmark) addScaleCases() {
	fl, d := b.fl, b.fl.doppelDelay
	b.scaleCases = append(b.scaleCases, scaleCase{name: exactCase, server: "doppel", start: b.freshDelay, url: d.base + "/slow", header: "X-Proxy: exact",
		rate: b.cfg.rate, target: 200 * time.Millisecond, journal: true})
	if b.cfg.idleConns+b.cfg.stalledConns > 0 {
		b.scaleCases = append(b.scaleCases, scaleCase{name: hostileCase(b.cfg), server: "doppel", start: b.freshDelay, url: d.base + "/slow", header: "X-Proxy: exact",
			rate: b.cfg.rate, target: 200 * time.Millisecond, journal: true, idle: b.cfg.idleConns, stalled: b.cfg.stalledConns})
	}
	for _, rate := range b.cfg.scaleRates {
		b.scaleCases = append(b.scaleCases,
			scaleCase{name: fmt.Sprintf("delay 1 s at %.0f/s", rate), server: "doppel", start: b.freshDelay, url: d.base + "/small", rate: rate, target: time.Second},
			scaleCase{name: fmt.Sprintf("toxiproxy 1 s toxic at %.0f/s", rate), server: "toxiproxy", start: fl.startToxiDelay, url: fl.toxiDelay + "/small", rate: rate, target: time.Second})
	}
}

// checkAnswers fetches every URL once before any load: a target that does
// not answer correctly is a setup failure, not a data point.
func (b *benchmark) checkAnswers(ctx context.Context) error {
	for _, c := range append(append([]benchCase(nil), b.cases...), b.rateCases...) {
		if err := check(ctx, c.url, c.key.path, c.header); err != nil {
			return fmt.Errorf("%s does not answer correctly: %w", c.key.target, err)
		}
	}
	// The delay runs' servers start with each run, which checks them;
	// the first doppel-delay is up already.
	for _, c := range b.scaleCases {
		if c.server != "doppel" {
			continue
		}
		if err := check(ctx, c.url, "/small", c.header); err != nil {
			return fmt.Errorf("doppel-delay (%s) does not answer correctly: %w", c.name, err)
		}
	}
	return nil
}

const (
	wrkOverhead = 500 * time.Millisecond // wrk start, /proc scans
	lgOverhead  = 700 * time.Millisecond
	endMargin   = 20 * time.Second // stopping everything, the report
)

// plan fits the rounds into the time budget, shortening the wrk runs (never
// below 2 s) if it must.
func (b *benchmark) plan(start time.Time) error {
	cfg := b.cfg
	nw, nl := time.Duration(len(b.cases)), time.Duration(len(b.rateCases))
	rounds := time.Duration(cfg.rounds)
	lgCost := cfg.rateWarm + cfg.rateDur + lgOverhead
	// A scale run is a rate run whose answers take up to a second more,
	// with a server started and stopped around it.
	scaleCost := time.Duration(len(b.scaleCases)) * (lgCost + 3*time.Second)
	warmCost := nw * (cfg.warm + wrkOverhead)
	left := time.Until(start.Add(cfg.budget)) - endMargin
	round := func(d time.Duration) time.Duration { return nw*(d+wrkOverhead) + nl*lgCost + scaleCost }
	if warmCost+rounds*round(cfg.dur) > left {
		avail := left - warmCost - rounds*(nw*wrkOverhead+nl*lgCost+scaleCost)
		d := (avail / (rounds * nw)).Truncate(time.Second)
		if d < 2*time.Second {
			return fmt.Errorf("the time budget is too small: %d rounds need about %s more than the %s left (installs may have used it; run again, they are cached)",
				cfg.rounds, (warmCost + rounds*round(2*time.Second) - left).Round(time.Second), left.Round(time.Second))
		}
		fmt.Fprintf(os.Stderr, "bench: shortening wrk runs from %s to %s to stay within the budget\n", cfg.dur, d)
		cfg.dur = d
	}
	b.perRound = round(cfg.dur)
	fmt.Fprintf(os.Stderr, "bench: plan: warm-up %s, then %d rounds of %d wrk runs (%s) + %d open-loop runs (%s at %.0f/s) + %d delay runs, about %s per round; %s left in the budget\n",
		warmCost.Round(time.Second), cfg.rounds, nw, cfg.dur, nl, cfg.rateDur, cfg.rate, len(b.scaleCases), b.perRound.Round(time.Second), left.Round(time.Second))
	return nil
}

func (b *benchmark) alive() error {
	fl := b.fl
	// doppel-delay is started and stopped by each delay run.
	for _, s := range []*server{fl.upstream, fl.nginx, fl.goproxy, fl.toxiproxy, fl.doppel, fl.doppelNoJournal, fl.doppelWhen,
		fl.doppelSession, fl.doppelReceipts, fl.doppelInfo, fl.doppelTLS, fl.mountebank} {
		if s == nil {
			continue // not started with -only doppel
		}
		if s.proc.exited() {
			return fmt.Errorf("%s (pid %d) exited unexpectedly (%v); its log says:\n%s", s.proc.name, s.proc.pid, s.proc.waitErr, s.proc.logTail())
		}
	}
	return nil
}

func (b *benchmark) warmUp(ctx context.Context) error {
	fmt.Fprintf(os.Stderr, "bench: warm-up, %s per target\n", b.cfg.warm)
	for _, c := range b.cases {
		r, err := b.measureCase(ctx, c, b.cfg.warm)
		if err != nil {
			return fmt.Errorf("warm-up of %s %s: %w", c.key.target, c.key.path, err)
		}
		if r.Non2xx+r.SockErrs > 0 {
			b.problems = append(b.problems, fmt.Sprintf("warm-up: %s %s: %d non-2xx, %d socket errors", c.key.target, c.key.path, r.Non2xx, r.SockErrs))
		}
	}
	return b.alive()
}

func (b *benchmark) measure(ctx context.Context) error {
	cfg := b.cfg
	deadline, _ := ctx.Deadline()
	for r := 1; r <= cfg.rounds; r++ {
		if !deadline.IsZero() && time.Until(deadline) < b.perRound+endMargin {
			fmt.Fprintf(os.Stderr, "bench: WARNING: stopping after %d of %d rounds to stay within the budget\n", b.roundsDone, cfg.rounds)
			break
		}
		for _, c := range b.cases {
			w, err := b.measureCase(ctx, c, cfg.dur)
			if err != nil {
				if aerr := b.alive(); aerr != nil {
					return aerr
				}
				return fmt.Errorf("round %d, %s %s: %w", r, c.key.target, c.key.path, err)
			}
			b.wrk[c.key] = append(b.wrk[c.key], w)
			if w.Non2xx+w.SockErrs > 0 {
				b.problems = append(b.problems, fmt.Sprintf("round %d: %s %s: %d non-2xx answers, %d socket errors (of %d requests)", r, c.key.target, c.key.path, w.Non2xx, w.SockErrs, w.Requests))
			}
			fmt.Fprintf(os.Stderr, "bench: round %d/%d  %-13s %-9s %9.0f req/s  p50 %-8s p99 %-8s  %6.1f µs CPU/req  %s\n",
				r, cfg.rounds, c.key.target, c.key.path, w.RPS, fmtDur(w.P50), fmtDur(w.P99), w.CPUPerReq, errNote(w.Non2xx, w.SockErrs))
		}
		for _, c := range b.rateCases {
			l, err := runLoadgen(ctx, cfg, c.url, "", cfg.rate)
			if err != nil {
				if aerr := b.alive(); aerr != nil {
					return aerr
				}
				return fmt.Errorf("round %d, open-loop %s: %w", r, c.key.target, err)
			}
			b.lg[c.key.target] = append(b.lg[c.key.target], l)
			if l.Errors+l.Non2xx > 0 {
				b.problems = append(b.problems, fmt.Sprintf("round %d: open-loop %s: %d errors, %d non-2xx of %d (first: %s)", r, c.key.target, l.Errors, l.Non2xx, l.Sent, l.FirstError))
			}
			fmt.Fprintf(os.Stderr, "bench: round %d/%d  %-13s open-loop %.0f/s  p50 %-8s p99 %-8s max %-8s (generator lag p99 %s)\n",
				r, cfg.rounds, c.key.target, cfg.rate, fmtUs(l.P50us), fmtUs(l.P99us), fmtUs(l.MaxUs), fmtUs(l.LagP99us))
		}
		for _, c := range b.scaleCases {
			if err := b.measureScale(ctx, r, c); err != nil {
				return err
			}
		}
		if err := b.alive(); err != nil {
			return err
		}
		b.roundsDone++
	}
	return nil
}

// measureCase runs one closed-loop measurement of c for d.
func (b *benchmark) measureCase(ctx context.Context, c benchCase, d time.Duration) (wrkRun, error) {
	if c.proto != 0 {
		return measureH2bench(ctx, b.cfg, c.url, c.proto, d, c.srv.proc.pid)
	}
	return measureWrk(ctx, b.cfg, c.url, c.header, d, c.srv.proc.pid)
}

// exactCase names the exact-delay run.
const exactCase = "delay 200 ms over a 50 ms upstream"

// freshDelay starts a doppel-delay of its own for one run, stopping the
// one before; the run stops it.
func (b *benchmark) freshDelay(ctx context.Context) (*server, error) {
	if d := b.fl.doppelDelay; d != nil {
		b.sup.stop(d.proc)
		b.fl.doppelDelay = nil
	}
	return b.fl.startDelay(ctx)
}

func (b *benchmark) measureScale(ctx context.Context, round int, c scaleCase) error {
	// A fresh server, stopped after the run.
	srv, err := c.start(ctx)
	if err != nil {
		return fmt.Errorf("round %d, %s: %w", round, c.name, err)
	}
	defer b.sup.stop(srv.proc)
	if err := check(ctx, c.url, "/small", c.header); err != nil {
		return fmt.Errorf("round %d, %s: %w", round, c.name, err)
	}
	pid := srv.proc.pid
	idle := rssOf([]int{pid})
	if c.idle+c.stalled > 0 {
		h, err := openHostile(ctx, srv.base, c.idle, c.stalled)
		if err != nil {
			return fmt.Errorf("round %d, %s: %w", round, c.name, err)
		}
		defer h.close()
	}
	cpu0, err := treeCPU(pid)
	if err != nil {
		return err
	}
	stop := sampleRSS(processTree(pid))
	l, err := runLoadgen(ctx, b.cfg, c.url, c.header, c.rate)
	peak := stop()
	cpu1, cerr := treeCPU(pid)
	if err != nil {
		return fmt.Errorf("round %d, %s: %w", round, c.name, err)
	}
	if cerr != nil {
		return fmt.Errorf("%s died during %s: %w\n%s", srv.name, c.name, cerr, srv.proc.logTail())
	}
	run := scaleRun{Result: l, RSSPeak: peak, RSSIdle: idle}
	if c.journal {
		if run.DoppelP50us, run.DoppelP99us, err = journalDurations(ctx, b.fl.delayAdmin, "exact", l.Sent); err != nil {
			return fmt.Errorf("round %d, %s: reading the journal: %w", round, c.name, err)
		}
	}
	if n := l.Sent + int(float64(l.Sent)*b.cfg.rateWarm.Seconds()/b.cfg.rateDur.Seconds()); n > 0 {
		run.CPUPerReq = float64((cpu1 - cpu0).Microseconds()) / float64(n)
	}
	b.scale[c.name] = append(b.scale[c.name], run)
	if l.Errors+l.Non2xx > 0 {
		b.problems = append(b.problems, fmt.Sprintf("round %d: %s: %d errors, %d non-2xx of %d (first: %s)", round, c.name, l.Errors, l.Non2xx, l.Sent, l.FirstError))
	}
	at := ""
	if c.journal {
		at = fmt.Sprintf(" (at Doppel p50 %s p99 %s)", fmtUs(run.DoppelP50us), fmtUs(run.DoppelP99us))
	}
	fmt.Fprintf(os.Stderr, "bench: round %d/%d  %-36s p50 %-8s p99 %-8s%s  %d in flight, RSS %.0f MiB, %.0f µs CPU/req (generator lag p99 %s) %s\n",
		round, b.cfg.rounds, c.name, fmtUs(l.P50us), fmtUs(l.P99us), at, l.PeakInFlight, float64(peak)/(1<<20), run.CPUPerReq, fmtUs(l.LagP99us), errNote(int64(l.Non2xx), int64(l.Errors)))
	return nil
}

// journalDurations reads the newest n requests of proxy from a Doppel's
// journal (its admin API public) and returns the p50 and p99 of their
// durations, in µs: Doppel's own measure, to the microsecond.
func journalDurations(ctx context.Context, admin, proxy string, n int) (p50, p99 float64, err error) {
	n = min(max(n, 1), 10000)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/api/v1/requests?proxy=%s&limit=%d", admin, proxy, n)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, 0, fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var page struct {
		Requests []struct {
			DurationMS float64 `json:"duration_ms"`
		} `json:"requests"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&page); err != nil {
		return 0, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(page.Requests) == 0 {
		return 0, 0, fmt.Errorf("GET %s: no requests", url)
	}
	us := make([]float64, len(page.Requests))
	for i, r := range page.Requests {
		us[i] = r.DurationMS * 1e3
	}
	slices.Sort(us)
	return percentile(us, 0.50), percentile(us, 0.99), nil
}

// percentile of sorted xs, by the nearest rank.
func percentile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func errNote(non2xx, sock int64) string {
	if non2xx+sock == 0 {
		return ""
	}
	return fmt.Sprintf("(%d non-2xx, %d socket errors)", non2xx, sock)
}

// benign are log lines every run produces and that say nothing about the
// server: when wrk stops it closes its connections with requests in flight.
var benign = []struct{ file, substr, why string }{
	{"goproxy.log", "proxy error: context canceled", "httputil.ReverseProxy's default ErrorLog noting requests wrk abandoned when it stopped"},
	{"mountebank.log", "ECONNRESET", "connections wrk reset when it stopped"},
}

// scanLogs reports what the servers wrote to their logs. Doppel at level
// error should write nothing at all while serving.
func scanLogs(tmp string) []string {
	var out []string
	paths, _ := filepath.Glob(filepath.Join(tmp, "*.log"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		name := filepath.Base(p)
		var lines []string
		expected := map[string]int{}
	next:
		for l := range strings.Lines(string(b)) {
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			for _, bn := range benign {
				if bn.file == name && strings.Contains(l, bn.substr) {
					expected[bn.why]++
					continue next
				}
			}
			lines = append(lines, l)
		}
		for why, n := range expected {
			out = append(out, fmt.Sprintf("%s: %d expected line(s): %s", name, n, why))
		}
		if len(lines) > 0 {
			out = append(out, fmt.Sprintf("%s has %d other line(s); first: %.300s", name, len(lines), lines[0]))
		}
	}
	return out
}
