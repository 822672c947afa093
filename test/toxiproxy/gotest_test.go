package toxiproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runner runs a release's tests with go test -json in its copy, and
// gathers what they did.
type runner struct {
	t         *testing.T
	work, api string
	log       io.Writer // go test's JSON, written as the tests run
	results   map[string]*result
	pkgOutput []string // the lines of no test (a build failure, a panic's end)
	err       error    // go test's last failure
}

// result is one Toxiproxy test's runs.
type result struct {
	pkg, name   string
	runs, fails int
	output      []string // the failed runs' lines
}

// resultKey is a test's among the results: its package and name.
func resultKey(pkg, name string) string { return pkg + " " + name }

func newRunner(t *testing.T, work, api, logPath string) *runner {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &runner{t: t, work: work, api: api, log: f, results: map[string]*result{}}
}

// all runs every package's tests count times. A test that panics ends
// its package's process, and the runs after it do not happen: the tests
// short of their count run again, by themselves, until each has had its
// count or none of them runs.
func (r *runner) all(expected []expectedTest, count int) {
	var dirs []string
	for _, p := range packages {
		dirs = append(dirs, "./"+p.dir)
	}
	r.run(count, dirs)
	type batch struct {
		dir   string
		count int
	}
	for {
		short := map[batch][]string{}
		for _, e := range expected {
			runs := 0
			if res := r.results[e.key()]; res != nil {
				runs = res.runs
			}
			if e.skip == "" && runs < count {
				b := batch{e.dir, count - runs}
				short[b] = append(short[b], e.name)
			}
		}
		ran := false
		for b, names := range short {
			ran = r.run(b.count, []string{"./" + b.dir}, "-run", "^("+strings.Join(names, "|")+")$") || ran
		}
		if !ran {
			return
		}
	}
}

// run runs go test on dirs, count times each test, with args; it says
// whether a test ran.
func (r *runner) run(count int, dirs []string, args ...string) bool {
	var skip []string
	for _, e := range excluded {
		if e.test != "" {
			skip = append(skip, e.test)
		}
	}
	args = append([]string{"test", "-json", "-p", "1", "-count", strconv.Itoa(count),
		"-timeout", (2*time.Minute + time.Duration(count)*time.Minute).String(),
		"-skip", "^(" + strings.Join(skip, "|") + ")$"}, args...)
	cmd := exec.Command("go", append(args, dirs...)...)
	cmd.Dir = r.work
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS="+os.Getenv("GOFLAGS")+" -mod=mod",
		"DOPPEL_TOXIPROXY_URL="+r.api)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, r.log), &stderr
	if err := cmd.Run(); err != nil {
		r.err = err
	}
	results, pkgOutput := parse(stdout.Bytes())
	if len(results) == 0 {
		r.t.Fatalf("no test ran: go %s (%v):\n%s%s", strings.Join(cmd.Args[1:], " "), r.err, stderr.String(), strings.Join(pkgOutput, ""))
	}
	r.pkgOutput = append(r.pkgOutput, pkgOutput...)
	ran := false
	for key, res := range results {
		if r.results[key] == nil {
			r.results[key] = &result{pkg: res.pkg, name: res.name}
		}
		all := r.results[key]
		all.runs += res.runs
		all.fails += res.fails
		all.output = append(all.output, res.output...)
		ran = ran || res.runs > 0
	}
	return ran
}

// parse reads go test -json: each top-level test's runs (a subtest's
// lines are its parent's), and the lines of no test (a build failure, a
// panic's end).
func parse(out []byte) (map[string]*result, []string) {
	results := map[string]*result{}
	var pkgOutput []string
	running := map[string][]string{} // a test's lines so far, this run
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev struct{ Action, Package, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Test == "" {
			if ev.Action == "output" || ev.Action == "build-output" {
				pkgOutput = append(pkgOutput, ev.Output)
			}
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		key := resultKey(ev.Package, top)
		r := results[key]
		if r == nil {
			r = &result{pkg: ev.Package, name: top}
			results[key] = r
		}
		switch {
		case ev.Action == "output":
			running[key] = append(running[key], ev.Output)
		case sub:
		case ev.Action == "pass" || ev.Action == "fail":
			r.runs++
			if ev.Action == "fail" {
				r.fails++
				r.output = append(r.output, slices.DeleteFunc(running[key], noise)...)
			}
			delete(running, key)
		}
	}
	return results, pkgOutput
}

// noise is go test's own framing of a test's lines.
func noise(line string) bool {
	l := strings.TrimSpace(line)
	return strings.HasPrefix(l, "=== RUN") || strings.HasPrefix(l, "=== PAUSE") || strings.HasPrefix(l, "=== CONT")
}
