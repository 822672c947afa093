package toxiproxy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// expectedTest is a test of a Toxiproxy file in scope, with the reason
// it is excluded, if it is.
type expectedTest struct{ pkg, dir, file, name, skip string }

func (e expectedTest) key() string { return resultKey(e.pkg, e.name) }

var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Z_0-9]\w*)\(\w+ \*testing\.T\)`)

// testsOf lists the tests of the packages that run, in file order.
func testsOf(t *testing.T, work string) []expectedTest {
	t.Helper()
	var all []expectedTest
	for _, p := range packages {
		files, err := filepath.Glob(filepath.Join(work, p.dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(work, f)
			rel = filepath.ToSlash(rel)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range testFunc.FindAllSubmatch(data, -1) {
				e := expectedTest{pkg: p.path, dir: p.dir, file: rel, name: string(m[1])}
				for _, x := range excluded {
					if x.file == rel && (x.test == "" || x.test == e.name) {
						e.skip = x.reason
					}
				}
				all = append(all, e)
			}
		}
	}
	return all
}

// moduleDir is the release's module in the Go module cache, downloaded
// there if it is not yet.
func moduleDir(t *testing.T, version string) string {
	t.Helper()
	dl := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	dl.Dir = t.TempDir() // outside any module: nothing of ours is read or written
	dl.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := dl.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s\n%s", module, version, err, m.Error, out)
	}
	return m.Dir
}

// copyTree copies the module, writable (the cache's copy is read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
}

// shim replaces the copy's server package with testdata/shim and removes
// the excluded files.
func shim(t *testing.T, work string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(work, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range excluded {
		if e.test == "" {
			if err := os.Remove(filepath.Join(work, filepath.FromSlash(e.file))); err != nil {
				t.Fatalf("excluded %s: %v", e.file, err)
			}
		}
	}
	ours, err := filepath.Glob(filepath.Join("testdata", "shim", "*.go"))
	if err != nil || len(ours) == 0 {
		t.Fatalf("the shim's files: %v", err)
	}
	for _, f := range ours {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type doppelProc struct {
	api, log string
	done     chan struct{}
}

func (d *doppelProc) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// startDoppel serves the binary with its Toxiproxy API on apiPort, until
// the test ends.
func startDoppel(t *testing.T, bin, logPath string) *doppelProc {
	t.Helper()
	dir := t.TempDir()
	// The document's server and admin ports are never bound (the flags
	// below bind free ones); they need only differ from toxiproxy.port.
	doc := fmt.Sprintf("server: {host: 127.0.0.1, port: %d}\nadmin: {host: 127.0.0.1, port: %d}\ncontrol: {socket: %s}\ntoxiproxy: {host: 127.0.0.1, port: %d}\n",
		apiPort+1, apiPort+2, strconv.Quote(filepath.Join(dir, "doppel.sock")), apiPort)
	cfg := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &doppelProc{api: net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)), log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-d.done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if d.exited() {
			t.Fatalf("Doppel exited at its start:\n%s", tail(logPath))
		}
		resp, err := http.Get("http://" + d.api + "/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Doppel's Toxiproxy API does not answer at %s: %v\n%s", d.api, err, tail(logPath))
		}
	}
}

func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
