package main

// SPEC §3 and §9 on documents nested far too deep: through the real
// binary, `config validate`, `serve` and the admin API refuse documents
// that fit under the 1 MiB bound but nest far past config.MaxNesting,
// naming the bound, while the process's peak resident memory stays under
// 100 MiB. Before the bound, 40,000 levels took 2.5 GB and 100,000 were
// killed past 5 GB.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
)

const (
	// nestingRSS is what a refusal may cost: peak RSS under 100 MiB.
	nestingRSS = 100 << 20
	// rssGuard is where a process is killed (and the test fails) rather
	// than let a broken bound take the machine's memory.
	rssGuard = 512 << 20
	// nestingBound is the message's text.
	nestingBound = "nested deeper than 64 levels, the bound on a document's nesting"
)

// deepShape is a value nested far past the bound, as YAML after a key
// (yaml, which may span lines) and as JSON (json, empty when it has no
// JSON form). lines is how many lines the YAML takes before the one where
// the bound is crossed.
type deepShape struct {
	name       string
	yaml, json string
	lines      int
}

var deepShapes = []deepShape{
	{name: "flow lists 40,000 deep",
		yaml: strings.Repeat("[", 40_000) + strings.Repeat("]", 40_000),
		json: strings.Repeat("[", 40_000) + strings.Repeat("]", 40_000)},
	{name: "flow lists 250,000 deep",
		yaml: strings.Repeat("[", 250_000) + strings.Repeat("]", 250_000),
		json: strings.Repeat("[", 250_000) + strings.Repeat("]", 250_000)},
	{name: "flow maps 100,000 deep",
		yaml: strings.Repeat("{a: ", 100_000) + "1" + strings.Repeat("}", 100_000),
		json: strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000)},
	{name: "block lists 200,000 deep",
		yaml:  "\n  " + strings.Repeat("- ", 200_000) + "1",
		lines: 1},
	{name: "block maps 1,400 deep",
		yaml: blockMaps(1400),
		// The mapping the key is in is the first level.
		lines: 64},
	{name: "tags that end a line, 100,000 deep",
		yaml:  "!t\n" + strings.Repeat("a: !t\n", 100_000) + "a: 1",
		lines: 64},
}

// blockMaps is n mappings, each the value of the last, indented one space
// more than it.
func blockMaps(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\n%sa:", strings.Repeat(" ", i))
	}
	b.WriteString(" 1")
	return b.String()
}

// runMeasured runs the binary to its exit through testdata/peakrss, and
// returns what it printed and its peak RSS. peakrss kills it at rssGuard.
func runMeasured(t *testing.T, inv invocation) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "peak")
	args := append([]string{strconv.Itoa(rssGuard), out, doppelBin}, inv.args...)
	cmd := exec.CommandContext(ctx, peakrss(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("doppel %q: %v", inv.args, err)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	var word string
	var peak int64
	if b, err := os.ReadFile(out); err != nil {
		t.Fatalf("doppel %q: no peak RSS (%v):\n%s", inv.args, err, r)
	} else if _, err := fmt.Sscanf(string(b), "%s %d", &word, &peak); err != nil {
		t.Fatalf("doppel %q: peak RSS %q: %v", inv.args, b, err)
	}
	if word == "killed" {
		t.Errorf("doppel %q passed %d MiB of resident memory and was killed", inv.args, rssGuard>>20)
	}
	return r, peak
}

var (
	peakrssOnce sync.Once
	peakrssBin  string
	peakrssErr  error
)

// peakrss builds testdata/peakrss once, beside the binary under test. A
// child's getrusage figure also covers the process that started it, and
// the test process is large (more so under the race detector): the
// binary is measured through this small one.
func peakrss(t *testing.T) string {
	t.Helper()
	peakrssOnce.Do(func() {
		peakrssBin = filepath.Join(filepath.Dir(doppelBin), "peakrss")
		if out, err := exec.Command("go", "build", "-o", peakrssBin, "./testdata/peakrss").CombinedOutput(); err != nil {
			peakrssErr = fmt.Errorf("building testdata/peakrss: %v\n%s", err, out)
		}
	})
	if peakrssErr != nil {
		t.Fatal(peakrssErr)
	}
	return peakrssBin
}

// guardRSS kills p, a long-running serve, should its resident memory pass
// rssGuard, failing the test, until the returned stop is called.
func guardRSS(t *testing.T, p *os.Process) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if rss, _ := procmem.Resident(p.Pid); rss > rssGuard {
				_ = p.Kill()
				t.Errorf("pid %d reached %d MiB of resident memory and was killed", p.Pid, rss>>20)
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// TestDeepDocumentsAreRefusedWithBoundedMemory: `config validate` and
// `serve` refuse each deep shape with the bound and its line, in under
// 100 MiB.
func TestDeepDocumentsAreRefusedWithBoundedMemory(t *testing.T) {
	t.Parallel()
	procmem.Need(t)
	for _, sh := range deepShapes {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := serveConfig(t, dir, 0, 0, "extra: "+sh.yaml+"\n")
			src := readFile(t, cfg)
			if len(src) > 1<<20 {
				t.Fatalf("the document is %d bytes, over the 1 MiB bound", len(src))
			}
			line := strings.Count(src[:strings.Index(src, "extra:")], "\n") + 1 + sh.lines
			// A violation of the whole document names the file instead of a path.
			want := fmt.Sprintf("%s: %s (line %d)", cfg, nestingBound, line)

			r, peak := runMeasured(t, invocation{args: []string{"config", "validate", "--config", cfg}})
			t.Logf("config validate: peak RSS %.1f MiB", float64(peak)/(1<<20))
			if r.code != wantRejected || r.stdout != want+"\n" {
				t.Errorf("config validate: want exit 1 and %q, got:\n%s", want, r)
			}
			if peak >= nestingRSS {
				t.Errorf("config validate: peak RSS %.1f MiB, want under 100 MiB", float64(peak)/(1<<20))
			}

			r, peak = runMeasured(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
			t.Logf("serve: peak RSS %.1f MiB", float64(peak)/(1<<20))
			if r.code != wantRejected || !strings.Contains(r.stderr, "the configuration is invalid:\n"+want+"\n") {
				t.Errorf("serve: want exit 1 and %q, got:\n%s", want, r)
			}
			if peak >= nestingRSS {
				t.Errorf("serve: peak RSS %.1f MiB, want under 100 MiB", float64(peak)/(1<<20))
			}
		})
	}
}

// TestDeepAdminBodiesAreRefusedWithBoundedMemory: a running serve answers
// 400 CONFIG_INVALID naming the bound to each deep shape as a proxy body
// (JSON where it has a JSON form, YAML otherwise), and to ten deep bodies
// at once, with its peak RSS under 100 MiB.
func TestDeepAdminBodiesAreRefusedWithBoundedMemory(t *testing.T) {
	t.Parallel()
	procmem.Need(t)
	cfg := serveConfig(t, t.TempDir(), 0, 0, "")
	p := startProc(t, invocation{
		args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		env:  map[string]string{"DOPPEL_ADMIN_TOKENS": `{"ci": {"token": "` + envToken + `", "group": "admin"}}`},
	})
	p.waitServing()
	addr := lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
	stop := guardRSS(t, p.cmd.Process)
	defer stop()
	before := procmem.MustPeak(t, p.cmd.Process.Pid)

	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/proxies", strings.NewReader(body))
		req.Header.Set("X-Proxy-Authorization", "Bearer "+envToken)
		res, err := newClient().Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	refused := func(what string, status int, answer string) {
		t.Helper()
		if status != http.StatusBadRequest || !strings.Contains(answer, `"code":"CONFIG_INVALID"`) || !strings.Contains(answer, nestingBound) {
			t.Errorf("%s: want 400 CONFIG_INVALID naming the bound, got %d %s", what, status, answer)
		}
	}
	for _, sh := range deepShapes {
		body := `{"name": "deep", "type": "http", "url": "http://127.0.0.1:9", "headers": ` + sh.json + `}`
		if sh.json == "" {
			body = "name: deep\ntype: http\nurl: http://127.0.0.1:9\nheaders: " + sh.yaml + "\n"
		}
		if len(body) > 1<<20 {
			t.Fatalf("%s: the body is %d bytes, over the 1 MiB bound", sh.name, len(body))
		}
		status, answer := post(body)
		refused(sh.name, status, answer)
	}

	// Ten 60 KB bodies at once, each within encoding/json's own bound of
	// 10,000 levels: before the bound they took the process to 2.2 GB.
	deep := `{"name": "deep", "type": "http", "url": "http://127.0.0.1:9", "headers": ` +
		strings.Repeat(`{"a": `, 9_990) + `"v"` + strings.Repeat("}", 9_991)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			status, answer := post(deep)
			refused(fmt.Sprintf("concurrent body %d", i), status, answer)
		})
	}
	wg.Wait()

	peak := procmem.MustPeak(t, p.cmd.Process.Pid)
	t.Logf("peak RSS: %.1f MiB serving, %.1f MiB after the deep bodies", float64(before)/(1<<20), float64(peak)/(1<<20))
	if peak >= nestingRSS {
		t.Errorf("peak RSS %.1f MiB, want under 100 MiB", float64(peak)/(1<<20))
	}
}
