// Command bench is the orchestrator behind `make bench` (bench/run.sh).
//
// It starts one small Go upstream and, in front of it, nginx, a bare
// httputil.ReverseProxy, Toxiproxy and Doppel (three times: logging at
// error, the same with the request journal off, and at the default info
// level with its JSON lines going to /dev/null), plus
// Mountebank and nginx `return 200` for the mocked path. It then measures
// them interleaved (A B C A B C ...) with wrk for several rounds, charging
// each run the user+system CPU of the process that served it, and finishes
// with fixed-rate open-loop runs for latency percentiles. It prints medians
// over the rounds as Markdown tables and checks Doppel against the targets
// of issue 6 and the journal's (on, as by default, against off).
//
// With -only doppel it starts just the upstream and the two Doppels at log
// level error (journal on and off) and measures `/small` and the mock path:
// the journal's figures in a fraction of the time, with no peer installed.
// With -only delays it runs the delay runs alone: a 1 s delay at each
// -scale-rates rate, Doppel's beside Toxiproxy's latency toxic, and the
// exact 200 ms one.
//
// Every process is started here, on 127.0.0.1 ports the kernel picks, and
// only those PIDs are stopped at the end, on error and on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	binDir       string
	doppel       string
	toxiproxy    string
	mb           string
	nginx        string
	wrk          string
	rounds       int
	dur          time.Duration
	warm         time.Duration
	threads      int
	conns        int
	rate         float64
	rateDur      time.Duration
	rateWarm     time.Duration
	budget       time.Duration
	nginxWorkers int
	keep         bool
	out          string
	only         string
	scaleRates   []float64
	// idleConns and stalledConns: the bad input beside an exact-delay
	// run (hostile.go).
	idleConns, stalledConns int
	plot                    string
}

// onlyDoppel is -only doppel: the journal on/off rounds and nothing else.
func (c *config) onlyDoppel() bool { return c.only == "doppel" }

// onlyDelays is -only delays: the delay runs (Doppel's and Toxiproxy's at
// each rate, and the exact one) and nothing else.
func (c *config) onlyDelays() bool { return c.only == "delays" }

func (c *config) bin(name string) string { return filepath.Join(c.binDir, name) }

func main() {
	start := time.Now()
	cfg := &config{}
	flag.StringVar(&cfg.binDir, "bin", "bench/.cache/bin", "directory with upstream, goproxy, loadgen, doppel and Toxiproxy's server")
	flag.StringVar(&cfg.mb, "mb", "bench/.cache/mb/node_modules/.bin/mb", "Mountebank's mb")
	flag.StringVar(&cfg.nginx, "nginx", "nginx", "nginx binary")
	flag.StringVar(&cfg.wrk, "wrk", "wrk", "wrk binary")
	flag.IntVar(&cfg.rounds, "rounds", 3, "interleaved rounds (at least 3)")
	flag.DurationVar(&cfg.dur, "duration", 4*time.Second, "wrk duration per run (whole seconds)")
	flag.DurationVar(&cfg.warm, "warmup", time.Second, "unmeasured wrk run per target before the rounds")
	flag.IntVar(&cfg.threads, "threads", 2, "wrk -t")
	flag.IntVar(&cfg.conns, "conns", 32, "wrk -c")
	flag.Float64Var(&cfg.rate, "rate", 1000, "fixed rate of the open-loop runs, requests/s")
	flag.DurationVar(&cfg.rateDur, "rate-duration", 5*time.Second, "measured duration of each open-loop run")
	flag.DurationVar(&cfg.rateWarm, "rate-warmup", 500*time.Millisecond, "unmeasured lead-in of each open-loop run")
	flag.DurationVar(&cfg.budget, "budget", 9*time.Minute+30*time.Second, "hard bound on this program's run time")
	flag.IntVar(&cfg.nginxWorkers, "nginx-workers", 2, "nginx worker_processes (1 or 2 on a 2-core machine)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory (configs and logs)")
	flag.StringVar(&cfg.out, "out", "bench/.cache/last-run.md", "also write the report here (empty: don't)")
	flag.StringVar(&cfg.plot, "plot", "bench/.cache/last-run.svg", "also draw the figures here (empty: don't)")
	plotData := flag.String("plot-from", "", "only draw the plot (-plot) of a run's saved figures (the .json beside its report), then exit")
	flag.IntVar(&cfg.idleConns, "idle-conns", 16000, "connections that send nothing, held open beside an exact-delay run (0 with -stalled-conns 0: no such run)")
	flag.IntVar(&cfg.stalledConns, "stalled-conns", 1000, "connections that ask for a delayed 1 MiB answer and never read it, beside the same run")
	scale := flag.String("scale-rates", "2000,4000,8000", "rates of the delays-at-scale runs (1 s delay each, Doppel and Toxiproxy), comma-separated")
	flag.StringVar(&cfg.only, "only", "", `"doppel": only Doppel with the journal on and off, on /small and the mock path (no peers, no open loop); "delays": only the delay runs, Doppel's beside Toxiproxy's`)
	flag.Parse()
	if cfg.only != "" && !cfg.onlyDoppel() && !cfg.onlyDelays() {
		fmt.Fprintf(os.Stderr, "bench: FAILED: -only %q: the selections are doppel and delays\n", cfg.only)
		os.Exit(2)
	}
	if *plotData != "" {
		if err := plotFrom(*plotData, cfg.plot); err != nil {
			fmt.Fprintf(os.Stderr, "bench: FAILED: %v\n", err)
			os.Exit(1)
		}
		return
	}
	for f := range strings.SplitSeq(*scale, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			fmt.Fprintf(os.Stderr, "bench: FAILED: -scale-rates %q: %q is not a positive rate\n", *scale, f)
			os.Exit(2)
		}
		cfg.scaleRates = append(cfg.scaleRates, r)
	}
	// The servers run in a temporary directory: paths must be absolute.
	for _, p := range []*string{&cfg.binDir, &cfg.mb} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	cfg.doppel = cfg.bin("doppel")
	cfg.toxiproxy = cfg.bin("server")

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithDeadline(ctx, start.Add(cfg.budget))
	sup := newSupervisor()
	err := run(ctx, cfg, sup, start)
	cancel()
	stopSignals()
	sup.stopAll()
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Fprintf(os.Stderr, "bench: FAILED: the time budget (%s) ran out: %v\n", cfg.budget, err)
		case errors.Is(err, context.Canceled):
			fmt.Fprintln(os.Stderr, "bench: interrupted; every started process was stopped")
		default:
			fmt.Fprintf(os.Stderr, "bench: FAILED: %v\n", err)
		}
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "bench: done in %s\n", time.Since(start).Round(time.Second))
}

func run(ctx context.Context, cfg *config, sup *supervisor, start time.Time) error {
	if err := preflight(cfg); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "doppel-bench-")
	if err != nil {
		return err
	}
	// nginx workers drop to an unprivileged user when started as root; they
	// must still reach their temp directories.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintf(os.Stderr, "bench: keeping %s\n", tmp)
	} else {
		defer func() {
			sup.stopAll() // nothing may still write into tmp
			os.RemoveAll(tmp)
		}()
	}

	machine := describeMachine(cfg)
	fl, err := startAll(ctx, cfg, sup, tmp)
	if err != nil {
		return err
	}
	b := newBenchmark(cfg, fl, sup)
	if err := b.checkAnswers(ctx); err != nil {
		return err
	}
	if err := b.plan(start); err != nil {
		return err
	}
	if err := b.warmUp(ctx); err != nil {
		return err
	}
	if err := b.measure(ctx); err != nil {
		return err
	}
	b.problems = append(b.problems, scanLogs(tmp)...)
	report := b.report(machine, time.Since(start))
	fmt.Print(report)
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: could not write %s: %v\n", cfg.out, err)
		}
		// The figures themselves, which -plot-from draws again.
		data := strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + ".json"
		if err := b.save(data); err != nil {
			fmt.Fprintf(os.Stderr, "bench: could not write %s: %v\n", data, err)
		}
	}
	if cfg.plot != "" {
		if err := os.WriteFile(cfg.plot, []byte(plot(b.results())), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: could not write %s: %v\n", cfg.plot, err)
		}
	}
	if b.roundsDone < 3 {
		return fmt.Errorf("only %d round(s) fit in the time budget; at least 3 are required (try -duration 3s)", b.roundsDone)
	}
	return nil
}

// preflight fails early, and clearly, on anything missing.
func preflight(cfg *config) error {
	if cfg.rounds < 3 {
		return fmt.Errorf("-rounds %d: at least 3 rounds are required", cfg.rounds)
	}
	if cfg.dur < time.Second || cfg.rateDur < time.Second || cfg.rate <= 0 {
		return errors.New("-duration and -rate-duration must be at least 1s, -rate positive")
	}
	if cfg.nginxWorkers < 1 {
		return errors.New("-nginx-workers must be at least 1")
	}
	if cfg.idleConns < 0 || cfg.stalledConns < 0 {
		return errors.New("-idle-conns and -stalled-conns must not be negative")
	}
	if err := checkFileLimit(cfg.idleConns, cfg.stalledConns); err != nil {
		return err
	}
	if cfg.onlyDelays() {
		for _, name := range []string{"upstream", "loadgen", "doppel"} {
			if _, err := os.Stat(cfg.bin(name)); err != nil {
				return fmt.Errorf("%s is not built (%v); run bench/run.sh", name, err)
			}
		}
		if _, err := os.Stat(cfg.toxiproxy); err != nil {
			return fmt.Errorf("toxiproxy's server binary is missing (%v); run bench/run.sh, which installs it", err)
		}
		return nil
	}
	if cfg.onlyDoppel() {
		for _, name := range []string{"upstream", "doppel"} {
			if _, err := os.Stat(cfg.bin(name)); err != nil {
				return fmt.Errorf("%s is not built (%v); run bench/run.sh", name, err)
			}
		}
		path, err := exec.LookPath(cfg.wrk)
		if err != nil {
			return fmt.Errorf("%s not found (apt-get install -y wrk): %v", cfg.wrk, err)
		}
		cfg.wrk = path
		return nil
	}
	for _, name := range []string{"upstream", "goproxy", "loadgen", "doppel"} {
		if _, err := os.Stat(cfg.bin(name)); err != nil {
			return fmt.Errorf("%s is not built (%v); run bench/run.sh", name, err)
		}
	}
	if _, err := os.Stat(cfg.toxiproxy); err != nil {
		return fmt.Errorf("toxiproxy's server binary is missing (%v); run bench/run.sh, which installs it", err)
	}
	if _, err := os.Stat(cfg.mb); err != nil {
		return fmt.Errorf("mountebank is missing (%v); run bench/run.sh, which installs it", err)
	}
	for _, p := range []*string{&cfg.nginx, &cfg.wrk} {
		path, err := exec.LookPath(*p)
		if err != nil {
			return fmt.Errorf("%s not found (apt-get install -y nginx-light wrk): %v", *p, err)
		}
		*p = path
	}
	return nil
}
