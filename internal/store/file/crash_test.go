package file

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store/storetest"
)

// crashChildEnv switches the test binary into the write storm of
// TestCrashDuringWriteStorm: its value is the document's path.
const crashChildEnv = "DOPPEL_FILE_CRASH_CHILD"

// TestCrashStormChild is the child process: it saves version after version
// of the document, printing each revision on stdout before it saves it,
// until it is killed. Without the environment switch it does nothing.
func TestCrashStormChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("only runs as the child of TestCrashDuringWriteStorm")
	}
	s, err := Open(path, filepath.Join(filepath.Dir(path), "templates"))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	ctx := context.Background()
	for i := 0; ; i++ {
		snap, err := s.Load(ctx)
		if err != nil {
			fmt.Fprintln(out, "ERROR", err)
			out.Flush()
			os.Exit(3)
		}
		// Grow and shrink the document so that a torn write would show.
		p := &snap.Document.Proxies[0]
		p.Headers = map[config.HeaderName]config.HeaderValue{"X-Seq": config.HeaderValue(fmt.Sprint(i))}
		for j := range i % 40 {
			p.Headers[config.HeaderName(fmt.Sprintf("X-Pad-%d", j))] = config.HeaderValue(strings.Repeat("p", 200))
		}
		rev, err := config.DocumentRevision(snap.Document)
		if err != nil {
			fmt.Fprintln(out, "ERROR", err)
			out.Flush()
			os.Exit(3)
		}
		fmt.Fprintln(out, "REV", rev)
		out.Flush()
		if _, err := s.Save(ctx, snap.Document, snap.Revision); err != nil {
			fmt.Fprintln(out, "ERROR", err)
			out.Flush()
			os.Exit(3)
		}
	}
}

// TestCrashDuringWriteStorm: SPEC §10.2. A process saving as fast as it can
// is killed with SIGKILL at a random moment, several times. After each
// kill the document opens and loads, and is one of the versions written
// (its revision is the initial one or one the child announced before a
// save); the temporary files the kill left are removed by the next Open.
func TestCrashDuringWriteStorm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(path, []byte(storetest.Initial), 0o644); err != nil {
		t.Fatal(err)
	}
	initial, err := config.Load([]byte(storetest.Initial))
	if err != nil {
		t.Fatal(err)
	}
	rev0, _ := config.DocumentRevision(initial)
	written := map[config.Revision]bool{rev0: true}
	var mu sync.Mutex

	const kills = 6
	strays := 0
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashStormChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		saves := 0
		done := make(chan struct{})
		var childErr string
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "REV "):
					mu.Lock()
					written[config.Revision(strings.TrimPrefix(line, "REV "))] = true
					saves++
					mu.Unlock()
				case strings.HasPrefix(line, "ERROR"):
					childErr = line
				}
			}
		}()
		// Let the storm get going, then kill at a random moment.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := saves
			mu.Unlock()
			if n >= 5 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if childErr != "" {
			t.Fatalf("kill %d: the child failed: %s", k+1, childErr)
		}
		mu.Lock()
		n := saves
		mu.Unlock()
		if n == 0 {
			t.Fatalf("kill %d: the child never started saving", k+1)
		}

		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempPrefix(path)) {
				strays++
			}
		}
		s, err := Open(path, filepath.Join(dir, "templates"))
		if err != nil {
			t.Fatalf("kill %d: Open: %v", k+1, err)
		}
		snap, err := s.Load(context.Background())
		if err != nil {
			b, _ := os.ReadFile(path)
			t.Fatalf("kill %d (after %d saves): Load: %v\n%s", k+1, n, err, b)
		}
		mu.Lock()
		known := written[snap.Revision]
		mu.Unlock()
		if !known {
			t.Fatalf("kill %d: the document's revision %s is none of the %d versions written", k+1, snap.Revision, len(written))
		}
		entries, _ = os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "main.yaml" && e.Name() != "main.yaml.lock" {
				t.Errorf("kill %d: %s is left beside the document after Open", k+1, e.Name())
			}
		}
		t.Logf("kill %d after %d saves: revision %s", k+1, n, snap.Revision)
	}
	t.Logf("%d temporary files left by the kills were removed at Open", strays)
}
