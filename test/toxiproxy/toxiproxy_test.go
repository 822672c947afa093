// Package toxiproxy runs Toxiproxy's own tests against Doppel: make
// test-toxiproxy (docs/toxiproxy.md, "Toxiproxy's own tests").
//
// For each release in TOXIPROXY_VERSIONS it takes Toxiproxy's module from
// the Go module cache, copies it into a temporary directory, replaces its
// server package (the root package's non-test files) with the shim in
// testdata/shim, which makes each in-process call of the tests on Doppel
// through Toxiproxy's HTTP API, and runs api_test.go, proxy_test.go and the
// toxics tests that go through a proxy, unchanged, serially, against one
// Doppel started from this tree's binary with its Toxiproxy API on the
// port the tests' client uses. Each Toxiproxy test is a subtest here:
// failing with its own output, or skipped with the reason it cannot apply.
package toxiproxy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const module = "github.com/Shopify/toxiproxy/v2"

// apiPort is where every release's api_test.go finds the server
// (tclient.NewClient("http://127.0.0.1:8475"), testServer.Listen).
const apiPort = 8475

// excluded are the tests that cannot apply to a server reached over the
// API, with the reason each. A whole file (test "") is removed from the
// copy; a test of a kept file is skipped (its file still compiles against
// the shim).
var excluded = []struct{ file, test, reason string }{
	{"link_test.go", "", "ToxicLink, the chain of toxics inside Toxiproxy's process (package toxiproxy: unexported state)"},
	{"metrics_test.go", "", "Toxiproxy's Prometheus collectors read inside its process (package toxiproxy: unexported state); /metrics itself is tested in internal/toxiproxy"},
	{"proxy_collection_test.go", "", "ProxyCollection, Toxiproxy's in-memory map of proxies, made and read in process without a server"},
	{"api_test.go", "TestVersionEndpointReturnsVersion", "pins the server's own build string: {\"version\": \"git\"} in 2.12.0, toxiproxy.Version in 2.5.0"},
	{"proxy_test.go", "TestProxyDiffers", "Proxy.Differs, a comparison Toxiproxy's server makes in process, with no counterpart in the API (populate's use of it is TestPopulateExistingProxy)"},
	{"toxics/toxic_test.go", "TestToxicStub_WriteOutput", "a ToxicStub of Toxiproxy's toxics package, in process, with no proxy"},
	{"toxics/limit_data_test.go", "", "limit_data's Pipe through a ToxicStub in process, with no proxy"},
	{"toxics/slicer_test.go", "", "slicer's Pipe through a ToxicStub in process, with no proxy"},
}

// packages are the Toxiproxy packages whose tests run, and where.
var packages = []struct{ dir, path string }{{".", module}, {"toxics", module + "/toxics"}}

func TestToxiproxyOwnTests(t *testing.T) {
	if os.Getenv("DOPPEL_TOXIPROXY_TESTS") == "" {
		t.Skip("make test-toxiproxy runs Toxiproxy's own tests against Doppel")
	}
	versions := strings.FieldsFunc(envOr("TOXIPROXY_VERSIONS", "v2.12.0 v2.5.0"), func(r rune) bool { return r == ' ' || r == ',' })
	count, err := strconv.Atoi(envOr("TOXIPROXY_COUNT", "1"))
	if err != nil || count < 1 {
		t.Fatalf("TOXIPROXY_COUNT=%q: want a count of at least 1", os.Getenv("TOXIPROXY_COUNT"))
	}
	for _, v := range versions {
		if !regexp.MustCompile(`^v2\.\d+\.\d+$`).MatchString(v) {
			t.Fatalf("TOXIPROXY_VERSIONS: %q is not a release of Toxiproxy 2 (v2.X.Y)", v)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "doppel")
	build := exec.Command("go", "build", "-o", bin, "./cmd/doppel")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building Doppel: %v\n%s", err, out)
	}
	var summary []string
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			began := time.Now()
			passed, skipped, failed := runRelease(t, bin, v, count)
			line := fmt.Sprintf("%s: %d passed, %d failed, %d excluded, in %s", v, passed, len(failed), skipped, time.Since(began).Round(100*time.Millisecond))
			if len(failed) > 0 {
				line += "\n  failed: " + strings.Join(failed, ", ")
			}
			summary = append(summary, line)
		})
	}
	t.Logf("Toxiproxy's own tests against Doppel, each run %d time(s):\n%s", count, strings.Join(summary, "\n"))
	if t.Failed() && os.Getenv("TOXIPROXY_LOGS") == "" {
		t.Log("TOXIPROXY_LOGS=DIR keeps Doppel's log and go test's JSON of each release in DIR")
	}
}

// runRelease runs one release's tests against a Doppel of its own, count
// times each, and reports each as a subtest.
func runRelease(t *testing.T, bin, version string, count int) (passed, skipped int, failed []string) {
	work := filepath.Join(t.TempDir(), "toxiproxy")
	if err := copyTree(moduleDir(t, version), work); err != nil {
		t.Fatal(err)
	}
	expected := testsOf(t, work)
	shim(t, work)
	logs := envOr("TOXIPROXY_LOGS", t.TempDir())
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	doppel := startDoppel(t, bin, filepath.Join(logs, "doppel-"+version+".log"))
	r := newRunner(t, work, "http://"+doppel.api, filepath.Join(logs, "tests-"+version+".json"))
	r.all(expected, count)
	if doppel.exited() {
		t.Errorf("Doppel exited during the tests; its log: %s", doppel.log)
	}

	for _, e := range expected {
		t.Run(e.name, func(t *testing.T) {
			if e.skip != "" {
				skipped++
				t.Skip(e.skip)
			}
			res := r.results[e.key()]
			switch {
			case res != nil && res.fails > 0:
				failed = append(failed, e.name)
				t.Errorf("%s: failed %d of %d runs:\n%s", e.file, res.fails, res.runs, strings.Join(res.output, ""))
			case res == nil || res.runs < count:
				failed = append(failed, e.name)
				runs := 0
				if res != nil {
					runs = res.runs
				}
				t.Errorf("%s %s ran %d of %d times; the package's output:\n%s", e.file, e.name, runs, count, strings.Join(r.pkgOutput, ""))
			default:
				passed++
			}
		})
	}
	// A test outside the list (a name its pattern missed) or a failure of
	// no test fails the release too.
	for key, res := range r.results {
		if res.fails > 0 && !slices.ContainsFunc(expected, func(e expectedTest) bool { return e.key() == key }) {
			failed = append(failed, res.name)
			t.Errorf("%s %s: failed %d of %d runs:\n%s", res.pkg, res.name, res.fails, res.runs, strings.Join(res.output, ""))
		}
	}
	if r.err != nil && len(failed) == 0 {
		t.Errorf("go test failed with every test passing (%v):\n%s", r.err, strings.Join(r.pkgOutput, ""))
	}
	return passed, skipped, failed
}
