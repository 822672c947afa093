package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/doppelproxy/doppel/bench/internal/openloop"
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtDur(d time.Duration) string { return fmtUs(float64(d.Nanoseconds()) / 1e3) }

func fmtUs(us float64) string {
	switch {
	case math.IsNaN(us):
		return "–"
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 100_000:
		return fmt.Sprintf("%.2f ms", us/1000)
	default:
		return fmt.Sprintf("%.0f ms", us/1000)
	}
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

// describeMachine is the machine and tool versions, as Markdown lines.
func describeMachine(cfg *config) string {
	var sb strings.Builder
	model := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				mem = strings.TrimSpace(rest)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cmdOut := func(name string, args ...string) string {
		out, _ := exec.Command(name, args...).CombinedOutput()
		line, _, _ := strings.Cut(string(bytes.TrimSpace(out)), "\n")
		return line
	}
	toxi := "?"
	if bi, err := buildinfo.ReadFile(cfg.toxiproxy); err == nil {
		toxi = bi.Main.Version
	}
	fmt.Fprintf(&sb, "- CPU: %d × %s (nproc %d), memory %s, Linux %s\n", runtime.NumCPU(), model, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)))
	src := cmdOut("git", "describe", "--always", "--dirty")
	if src == "" || strings.HasPrefix(src, "fatal") {
		src = "unknown"
	}
	fmt.Fprintf(&sb, "- Go: %s; Doppel: %s, built from %s\n", runtime.Version(), cmdOut(cfg.doppel, "version"), src)
	wrkVer := strings.Fields(cmdOut(cfg.wrk, "-v"))
	if len(wrkVer) > 2 {
		wrkVer = wrkVer[:2]
	}
	if cfg.onlyDoppel() {
		fmt.Fprintf(&sb, "- -only doppel: no peers; load from %s\n", cmdOut(cfg.wrk, "-v"))
		return sb.String()
	}
	if cfg.onlyDelays() {
		fmt.Fprintf(&sb, "- -only delays: Toxiproxy %s; load from bench/cmd/loadgen (open loop)\n", toxi)
		return sb.String()
	}
	fmt.Fprintf(&sb, "- peers: %s (%d workers); Toxiproxy %s; Mountebank %s (node %s); load from %s\n",
		strings.TrimPrefix(cmdOut(cfg.nginx, "-v"), "nginx version: "), cfg.nginxWorkers, toxi,
		cmdOut(cfg.mb, "--version"), cmdOut("node", "--version"), strings.Join(wrkVer, " "))
	return sb.String()
}

type row struct {
	key                             caseKey
	rps, p50, p99, cpu, rss         float64
	errs                            int64
	xDirect, xNginx, xGo, xMB       float64
	rpsRounds                       []float64
	cpuRounds                       []float64
	p50Rounds, p99Rounds, rssRounds []float64
}

// ratio is the median over rounds of this run's req/s divided by the
// reference's req/s in the same round (the two ran seconds apart).
func (b *benchmark) ratio(k, ref caseKey) float64 {
	a, r := b.wrk[k], b.wrk[ref]
	if len(r) == 0 || len(a) == 0 {
		return math.NaN()
	}
	var xs []float64
	for i := range min(len(a), len(r)) {
		if r[i].RPS > 0 {
			xs = append(xs, a[i].RPS/r[i].RPS)
		}
	}
	return median(xs)
}

func (b *benchmark) rows() []row {
	var rows []row
	for _, c := range b.cases {
		runs := b.wrk[c.key]
		if len(runs) == 0 {
			continue
		}
		r := row{key: c.key}
		for _, w := range runs {
			r.rpsRounds = append(r.rpsRounds, w.RPS)
			r.cpuRounds = append(r.cpuRounds, w.CPUPerReq)
			r.p50Rounds = append(r.p50Rounds, float64(w.P50.Nanoseconds())/1e3)
			r.p99Rounds = append(r.p99Rounds, float64(w.P99.Nanoseconds())/1e3)
			r.rssRounds = append(r.rssRounds, float64(w.RSSPeak)/(1<<20))
			r.errs += w.Non2xx + w.SockErrs
		}
		r.rps, r.cpu, r.p50, r.p99, r.rss = median(r.rpsRounds), median(r.cpuRounds), median(r.p50Rounds), median(r.p99Rounds), median(r.rssRounds)
		r.xDirect, r.xNginx, r.xGo, r.xMB = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if c.key.path == mockPath {
			r.xDirect = b.ratio(c.key, caseKey{"direct", "/small"})
			r.xNginx = b.ratio(c.key, caseKey{"nginx-return", mockPath})
			r.xMB = b.ratio(c.key, caseKey{"mountebank", mockPath})
		} else {
			r.xDirect = b.ratio(c.key, caseKey{"direct", c.key.path})
			r.xNginx = b.ratio(c.key, caseKey{"nginx", c.key.path})
			r.xGo = b.ratio(c.key, caseKey{"goproxy", c.key.path})
		}
		rows = append(rows, r)
	}
	return rows
}

func (b *benchmark) lgMedian(target string, f func(openloop.Result) float64) float64 {
	var xs []float64
	for _, l := range b.lg[target] {
		xs = append(xs, f(l))
	}
	return median(xs)
}

// lgDelta is the median over rounds of target's minus goproxy's value.
func (b *benchmark) lgDelta(target string, f func(openloop.Result) float64) float64 {
	a, g := b.lg[target], b.lg["goproxy"]
	var xs []float64
	for i := range min(len(a), len(g)) {
		xs = append(xs, f(a[i])-f(g[i]))
	}
	return median(xs)
}

func (b *benchmark) report(machine string, elapsed time.Duration) string {
	cfg := b.cfg
	var sb strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	w("\n## Doppel peer benchmark — %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	w("%s", machine)
	if cfg.onlyDelays() {
		w("- load: %d interleaved rounds (%d completed), medians over rounds; total run time %s\n", cfg.rounds, b.roundsDone, elapsed.Round(time.Second))
		b.scaleReport(w)
		b.problemsReport(w)
		return sb.String()
	}
	w("- load: `wrk -t%d -c%d -d%ds --latency`, %d interleaved rounds (%d completed), medians over rounds; open loop %.0f req/s for %s (+%s warm-up) per target and round; total run time %s\n\n",
		cfg.threads, cfg.conns, int(cfg.dur/time.Second), cfg.rounds, b.roundsDone, cfg.rate, cfg.rateDur, cfg.rateWarm, elapsed.Round(time.Second))

	w("### Closed loop (wrk, %d connections)\n\n", cfg.conns)
	w("| target | path | req/s | spread | p50 | p99 | CPU µs/req | peak RSS MiB | errors | ×direct | ×nginx | ×goproxy | ×mountebank |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := b.rows()
	byKey := map[caseKey]row{}
	for _, r := range rows {
		byKey[r.key] = r
		path := r.key.path
		if path == mockPath {
			path = "/mock/{id}"
		}
		spread := (slices.Max(r.rpsRounds) - slices.Min(r.rpsRounds)) / r.rps * 100
		w("| %s | %s | %.0f | %.0f%% | %s | %s | %.1f | %.1f | %d | %s | %s | %s | %s |\n",
			r.key.target, path, r.rps, spread, fmtUs(r.p50), fmtUs(r.p99), r.cpu, r.rss, r.errs,
			fmtRatio(r.xDirect), fmtRatio(r.xNginx), fmtRatio(r.xGo), fmtRatio(r.xMB))
	}
	w("\nreq/s, p50, p99, CPU and RSS are medians over the rounds; spread is (max − min) / median of req/s over the rounds. CPU µs/req is the serving process's user+system CPU during the run divided by the requests wrk completed (for `direct`: the upstream; for nginx: master and workers). Ratios are medians of per-round ratios. For `/mock/{id}`, ×direct compares with direct `/small` and ×nginx with nginx `return 200`.\n\n")

	w("### Open loop, fixed %.0f req/s (latency from the scheduled send time)\n\n", cfg.rate)
	w("| target | path | p50 | p90 | p99 | p99.9 | max | errors | p99 − goproxy p99 | generator lag p99 |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range b.rateCases {
		t := c.key.target
		if len(b.lg[t]) == 0 {
			continue
		}
		var errs int
		for _, l := range b.lg[t] {
			errs += l.Errors + l.Non2xx
		}
		delta := "–"
		if t != "goproxy" {
			delta = fmt.Sprintf("%+.0f µs", b.lgDelta(t, func(l openloop.Result) float64 { return l.P99us }))
		}
		w("| %s | /small | %s | %s | %s | %s | %s | %d | %s | %s |\n", t,
			fmtUs(b.lgMedian(t, func(l openloop.Result) float64 { return l.P50us })),
			fmtUs(b.lgMedian(t, func(l openloop.Result) float64 { return l.P90us })),
			fmtUs(b.lgMedian(t, func(l openloop.Result) float64 { return l.P99us })),
			fmtUs(b.lgMedian(t, func(l openloop.Result) float64 { return l.P999us })),
			fmtUs(b.lgMedian(t, func(l openloop.Result) float64 { return l.MaxUs })),
			errs, delta,
			fmtUs(b.lgMedian(t, func(l openloop.Result) float64 { return l.LagP99us })))
	}

	b.journalReport(w, byKey)
	b.whenReport(w, byKey)
	b.featureReport(w, byKey)
	b.scaleReport(w)
	if cfg.onlyDoppel() {
		b.problemsReport(w)
		return sb.String()
	}

	w("\n### Targets\n\n")
	w("| target | doppel (log level error) | doppel-info (info, the default; JSON to /dev/null) |\n|---|---|---|\n")
	atLeast := func(x, goal float64) string {
		if math.IsNaN(x) {
			return "no data"
		}
		return fmt.Sprintf("%s (%s by %+.0f%%)", fmtRatio(x), verdict(x >= goal), (x/goal-1)*100)
	}
	atMost := func(x, goal float64, unit string) string {
		if math.IsNaN(x) {
			return "no data"
		}
		return fmt.Sprintf("%.1f %s (%s; %+.1f %s vs the %.0f %s limit)", x, unit, verdict(x <= goal), x-goal, unit, goal, unit)
	}
	line := func(name string, f func(target string) string) {
		w("| %s | %s | %s |\n", name, f("doppel"), f("doppel-info"))
	}
	line("forwarding `/small` ≥ 1.2× bare Go proxy", func(t string) string { return atLeast(byKey[caseKey{t, "/small"}].xGo, 1.2) })
	line("forwarding `/large` ≥ 1.3× nginx", func(t string) string { return atLeast(byKey[caseKey{t, "/large"}].xNginx, 1.3) })
	line("forwarding `/large` RSS flat (peak during `/large` − peak during `/small` < 16 MiB; journal off: on, it keeps up to 10,000 × 2 × 4 KiB of bodies)", func(t string) string {
		if t == "doppel" {
			t = "doppel-nojournal"
		}
		l, s := byKey[caseKey{t, "/large"}], byKey[caseKey{t, "/small"}]
		if len(l.rssRounds) == 0 || len(s.rssRounds) == 0 {
			return "no data"
		}
		d := slices.Max(l.rssRounds) - slices.Max(s.rssRounds)
		return fmt.Sprintf("%+.1f MiB, peak %.1f MiB (%s)", d, slices.Max(l.rssRounds), verdict(d < 16))
	})
	line("mocked `/mock/{id}` ≥ 20× Mountebank", func(t string) string { return atLeast(byKey[caseKey{t, mockPath}].xMB, 20) })
	line(fmt.Sprintf("p99 at %.0f req/s within 0.5 ms of the bare Go proxy", cfg.rate), func(t string) string {
		if len(b.lg[t]) == 0 || len(b.lg["goproxy"]) == 0 {
			return "no data"
		}
		d := b.lgDelta(t, func(l openloop.Result) float64 { return l.P99us })
		return fmt.Sprintf("%+.0f µs (%s; %+.0f µs vs the 500 µs limit)", d, verdict(d <= 500), d-500)
	})
	line("(issue 6) forwarding `/small` ≤ 40 µs CPU/req", func(t string) string { return atMost(byKey[caseKey{t, "/small"}].cpu, 40, "µs") })
	line("(issue 6) mocked `/mock/{id}` ≤ 20 µs CPU/req", func(t string) string { return atMost(byKey[caseKey{t, mockPath}].cpu, 20, "µs") })
	w("\nDoppel's RSS right after start: %.1f MiB.\n", float64(b.fl.doppelIdleRSS)/(1<<20))
	b.tcpReport(w, byKey, atLeast)
	b.problemsReport(w)
	return sb.String()
}

// tcpReport compares Doppel's tcp proxy with Toxiproxy relaying the same
// upstream to the same wrk.
func (b *benchmark) tcpReport(w func(string, ...any), byKey map[caseKey]row, atLeast func(x, goal float64) string) {
	added := func(target, path string) string {
		t, d := byKey[caseKey{target, path}], byKey[caseKey{"direct", path}]
		if len(t.p50Rounds) == 0 || len(d.p50Rounds) == 0 {
			return "no data"
		}
		return fmt.Sprintf("%+.0f µs", t.p50-d.p50)
	}
	w("\n### TCP relay (doppel-tcp: `type: tcp`; toxiproxy: its proxy; the same upstream and wrk)\n\n")
	w("| | /small | /large |\n|---|---|---|\n")
	w("| doppel-tcp req/s ≥ 1.0× Toxiproxy's | %s | %s |\n",
		atLeast(b.ratio(caseKey{"doppel-tcp", "/small"}, caseKey{"toxiproxy", "/small"}), 1),
		atLeast(b.ratio(caseKey{"doppel-tcp", "/large"}, caseKey{"toxiproxy", "/large"}), 1))
	w("| p50 added over direct: doppel-tcp | %s | %s |\n", added("doppel-tcp", "/small"), added("doppel-tcp", "/large"))
	w("| p50 added over direct: toxiproxy | %s | %s |\n", added("toxiproxy", "/small"), added("toxiproxy", "/large"))
	w("| CPU µs/req: doppel-tcp / toxiproxy | %.1f / %.1f | %.1f / %.1f |\n",
		byKey[caseKey{"doppel-tcp", "/small"}].cpu, byKey[caseKey{"toxiproxy", "/small"}].cpu,
		byKey[caseKey{"doppel-tcp", "/large"}].cpu, byKey[caseKey{"toxiproxy", "/large"}].cpu)
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func (b *benchmark) problemsReport(w func(string, ...any)) {
	w("\n### Problems seen\n\n")
	if len(b.problems) == 0 {
		w("none: every answer was 2xx, no socket errors, no process exited, no server logged anything.\n")
	}
	for _, p := range b.problems {
		w("- %s\n", p)
	}
}

// Budgets of the request journal: on (the defaults) against off, same
// path, same round; and of a fault condition counting every request.
const (
	journalMaxRPSLoss  = 5.0  // %
	journalMaxCPU      = 3.0  // µs per request
	whenMaxRPSLoss     = 10.0 // %
	sessionMaxRPSLoss  = 5.0  // %
	receiptsMaxRPSLoss = 3.0  // %
)

// Targets of the delay runs.
const (
	scaleMaxP99       = 1100 * time.Millisecond // a 1 s delay
	scaleMaxKiBParked = 30.0
	exactMaxP50Error  = 500 * time.Microsecond
	exactMaxP99Error  = 2 * time.Millisecond
	// Bad input may not delay the other clients' answers more than this,
	// at p99.
	hostileMaxP99 = time.Millisecond
)

// featureReport compares `doppel` with the same serving a live session's
// header, and with receipts on.
func (b *benchmark) featureReport(w func(string, ...any), byKey map[caseKey]row) {
	if len(b.wrk[caseKey{"doppel-session", "/small"}]) > 0 {
		w("\n### Sessions (doppel vs the same with a live session over its proxy, every request carrying its header)\n\n")
		b.pairReport(w, byKey, "doppel", "doppel-session", []string{"/small", mockPath}, sessionMaxRPSLoss, 0)
	}
	if len(b.wrk[caseKey{"doppel-receipts", "/small"}]) > 0 {
		w("\n### Receipts (doppel vs the same with `receipts: true`: X-Doppel-Fault on every answer)\n\n")
		b.pairReport(w, byKey, "doppel", "doppel-receipts", []string{"/small", mockPath}, receiptsMaxRPSLoss, 0)
	}
}

// scaleSummary is the medians over rounds of one scale case.
type scaleSummary struct {
	p50, p99, lagP99, cpu, rssMiB, kibParked float64
	inFlight                                 float64
	doppelP50, doppelP99                     float64 // journal runs
	rssOverIdle                              float64 // MiB
	errs, sent                               int
}

func (b *benchmark) scaleSummary(name string) (scaleSummary, bool) {
	runs := b.scale[name]
	if len(runs) == 0 {
		return scaleSummary{}, false
	}
	var p50, p99, lag, cpu, rss, kib, inflight, dp50, dp99, over []float64
	var s scaleSummary
	for _, r := range runs {
		if r.DoppelP50us > 0 {
			dp50 = append(dp50, r.DoppelP50us)
			dp99 = append(dp99, r.DoppelP99us)
		}
		p50 = append(p50, r.P50us)
		p99 = append(p99, r.P99us)
		lag = append(lag, r.LagP99us)
		cpu = append(cpu, r.CPUPerReq)
		rss = append(rss, float64(r.RSSPeak)/(1<<20))
		over = append(over, float64(r.RSSPeak-r.RSSIdle)/(1<<20))
		inflight = append(inflight, float64(r.PeakInFlight))
		if r.PeakInFlight > 0 {
			kib = append(kib, float64(r.RSSPeak-r.RSSIdle)/1024/float64(r.PeakInFlight))
		}
		s.errs += r.Errors + r.Non2xx
		s.sent += r.Sent
	}
	s.p50, s.p99, s.lagP99, s.cpu, s.rssMiB, s.kibParked, s.inFlight = median(p50), median(p99), median(lag), median(cpu), median(rss), median(kib), median(inflight)
	s.rssOverIdle = median(over)
	if len(dp50) > 0 {
		s.doppelP50, s.doppelP99 = median(dp50), median(dp99)
	}
	return s, true
}

// scaleReport: delays at scale, Doppel's beside Toxiproxy's, and how
// exact a delay is.
func (b *benchmark) scaleReport(w func(string, ...any)) {
	if len(b.scaleCases) == 0 {
		return
	}
	w("\n### Delays at scale (doppel-delay, info: `latency: {percentage: 1, min: 1, max: 1}` on forwarded `/small`; Toxiproxy: a `latency` toxic of 1000 ms downstream on a proxy to the same upstream; open loop, %s per run)\n\n", b.cfg.rateDur)
	w("| run | p50 | p99 | errors | peak in flight | peak RSS MiB | KiB per request in flight | CPU µs/req | generator lag p99 | p99 ≤ %s, no error, ≤ %.0f KiB |\n", scaleMaxP99, scaleMaxKiBParked)
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range b.scaleCases {
		if c.target != time.Second {
			continue
		}
		s, ok := b.scaleSummary(c.name)
		if !ok {
			continue
		}
		met := s.p99 <= float64(scaleMaxP99.Microseconds()) && s.errs == 0 && s.kibParked <= scaleMaxKiBParked
		v := verdict(met)
		if c.server != "doppel" {
			v = "(anchor)"
		}
		w("| %s | %s | %s | %d of %d | %.0f | %.1f | %.1f | %.0f | %s | %s |\n", c.name, fmtUs(s.p50), fmtUs(s.p99), s.errs, s.sent,
			s.inFlight, s.rssMiB, s.kibParked, s.cpu, fmtUs(s.lagP99), v)
	}
	w("\nEach run has a server of its own, started before it and stopped after. KiB per request in flight is (peak RSS − its RSS before the run) / peak in flight; CPU µs/req is its CPU during the run over the requests sent (warm-up included). Medians over rounds; errors summed.\n")
	if s, ok := b.scaleSummary(exactCase); ok {
		target := 200e3 // µs
		w("\n### Exact delays (`latency: {percentage: 1, min: 0.2, max: 0.2}` in front of an upstream answering in 50 ms, %.0f req/s)\n\n", b.cfg.rate)
		w("| run | total p50 | total p99 | error p50 | error p99 | at Doppel p50 | at Doppel p99 | errors | peak RSS MiB (over idle) | p50 error ≤ %s, p99 ≤ %s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n", exactMaxP50Error, exactMaxP99Error)
		met := s.p50-target <= float64(exactMaxP50Error.Microseconds()) && s.p99-target <= float64(exactMaxP99Error.Microseconds()) && s.errs == 0
		row := func(name string, s scaleSummary, v string) {
			w("| %s | %s | %s | %+.2f ms | %+.2f ms | %+.2f ms | %+.2f ms | %d of %d | %.1f (%+.1f) | %s |\n", name, fmtUs(s.p50), fmtUs(s.p99), (s.p50-target)/1e3, (s.p99-target)/1e3,
				(s.doppelP50-target)/1e3, (s.doppelP99-target)/1e3, s.errs, s.sent, s.rssMiB, s.rssOverIdle, v)
		}
		row(exactCase, s, verdict(met))
		if h, ok := b.scaleSummary(hostileCase(b.cfg)); ok {
			row(hostileCase(b.cfg), h, fmt.Sprintf("p99 %+.2f ms against the run alone (≤ %s: %s)", (h.p99-s.p99)/1e3, hostileMaxP99, verdict(h.p99-s.p99 <= float64(hostileMaxP99.Microseconds()) && h.errs == 0)))
		}
		w("\nThe error is the total the client measured (from the request's scheduled send) minus the 200 ms target: what the delay overshoots by. At Doppel is the same for the duration Doppel measured itself (the journal's `duration_ms`, from the request read to the answer written, to the microsecond): the difference is the client's side, the generator's scheduling, the loopback and the kernel.\n")
	}
}

// journalReport compares `doppel` (journal on, the defaults) with
// `doppel-nojournal` (`journal: {size: 0}`), both at log level error.
func (b *benchmark) journalReport(w func(string, ...any), byKey map[caseKey]row) {
	w("\n### The request journal (doppel at log level error: on, the defaults, vs `journal: {size: 0}`)\n\n")
	b.pairReport(w, byKey, "doppel-nojournal", "doppel", []string{"/small", mockPath}, journalMaxRPSLoss, journalMaxCPU)
}

// whenReport compares `doppel-when` (its mock's loss counts every request
// under `when.count`, and never fires) with `doppel`, on the mock path.
func (b *benchmark) whenReport(w func(string, ...any), byKey map[caseKey]row) {
	if len(b.wrk[caseKey{"doppel-when", mockPath}]) == 0 {
		return
	}
	w("\n### Fault conditions (doppel vs the same with `when: {count: {after: 1000000000}}` on the mock's loss: every request counted, one key)\n\n")
	b.pairReport(w, byKey, "doppel", "doppel-when", []string{mockPath}, whenMaxRPSLoss, 0)
}

// pairReport compares target on with target off (run first, seconds
// before it, in every round) on each path. The differences are medians
// over rounds of the per-round differences. maxCPU 0: no CPU budget.
func (b *benchmark) pairReport(w func(string, ...any), byKey map[caseKey]row, offName, onName string, paths []string, maxRPSLoss, maxCPU float64) {
	cpuBudget := ""
	if maxCPU > 0 {
		cpuBudget = fmt.Sprintf(" ≤ %.0f µs CPU |", maxCPU)
	}
	w("| path | req/s off | req/s on | Δ req/s | CPU µs/req off | CPU µs/req on | Δ CPU µs/req | peak RSS MiB off / on | ≤ %.0f %% req/s |%s\n", maxRPSLoss, cpuBudget)
	w("|---|---:|---:|---:|---:|---:|---:|---:|---|%s\n", map[bool]string{true: "---|", false: ""}[maxCPU > 0])
	for _, path := range paths {
		off, on := b.wrk[caseKey{offName, path}], b.wrk[caseKey{onName, path}]
		if len(off) == 0 || len(on) == 0 {
			continue
		}
		var dRPS, dCPU []float64
		for i := range min(len(off), len(on)) {
			if off[i].RPS > 0 {
				dRPS = append(dRPS, (on[i].RPS/off[i].RPS-1)*100)
			}
			dCPU = append(dCPU, on[i].CPUPerReq-off[i].CPUPerReq)
		}
		rOff, rOn := byKey[caseKey{offName, path}], byKey[caseKey{onName, path}]
		dr, dc := median(dRPS), median(dCPU)
		shown := path
		if path == mockPath {
			shown = "/mock/{id}"
		}
		cpuVerdict := ""
		if maxCPU > 0 {
			cpuVerdict = " " + verdict(dc <= maxCPU) + " |"
		}
		w("| %s | %.0f | %.0f | %+.1f %% | %.1f | %.1f | %+.1f | %.1f / %.1f | %s |%s\n", shown, rOff.rps, rOn.rps, dr, rOff.cpu, rOn.cpu, dc, rOff.rss, rOn.rss,
			verdict(dr >= -maxRPSLoss), cpuVerdict)
	}
	w("\nΔ are medians over rounds of the per-round differences (on − off; the off run goes first, seconds before the on one). Per round, Δ req/s: ")
	for _, path := range paths {
		off, on := b.wrk[caseKey{offName, path}], b.wrk[caseKey{onName, path}]
		var parts []string
		for i := range min(len(off), len(on)) {
			parts = append(parts, fmt.Sprintf("%+.1f %% / %+.1f µs", (on[i].RPS/off[i].RPS-1)*100, on[i].CPUPerReq-off[i].CPUPerReq))
		}
		w("%s %s; ", path, strings.Join(parts, ", "))
	}
	w("(req/s / CPU µs).\n")
}
