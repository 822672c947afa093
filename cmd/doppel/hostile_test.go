package main

// SPEC §5.4 on the admin listener (serve_test.go covers the proxy
// listener), and bodies streamed through the real binary with its peak
// resident memory read from /proc.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/doppelproxy/doppel/internal/testutil/procmem"
)

// adminUp starts doppel with cfg and returns it with its admin address.
func adminUp(t *testing.T, cfg string) (*proc, string) {
	t.Helper()
	p := startProc(t, invocation{args: []string{"serve", "--config", cfg, "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}})
	p.waitServing()
	addr := lineField(p.waitLine("the admin listener", startTimeout, func(l string) bool {
		return lineMsg(l) == "the admin API is listening"
	}), "admin_addr")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("no admin_addr: %v\n%s", err, p)
	}
	return p, addr
}

func TestAdminHostileClients(t *testing.T) {
	t.Parallel()
	t.Run("incomplete headers are cut off after 10 s", func(t *testing.T) {
		t.Parallel()
		p, addr := adminUp(t, serveConfig(t, t.TempDir(), 0, 0, ""))
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		closed := make(chan time.Duration, 1)
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.Copy(io.Discard, conn)
			closed <- time.Since(start)
		}()
		for range 2 {
			time.Sleep(2 * time.Second)
			if r := mustGet(t, newClient(), "http://"+addr+"/metrics", nil); r.status != http.StatusOK {
				t.Errorf("an admin request beside the slow one: status %d, want 200", r.status)
			}
			select {
			case d := <-closed:
				t.Fatalf("the slow client was cut off after %v, before the 10 s allowed", d)
			default:
			}
		}
		select {
		case d := <-closed:
			t.Logf("cut off after %v", d.Round(time.Millisecond))
			if d < 9*time.Second || d > 13*time.Second {
				t.Errorf("the slow admin client was cut off after %v, want about 10 s", d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the slow admin client was never cut off:\n%s", p)
		}
	})

	t.Run("headers over 1 MiB get 431", func(t *testing.T) {
		t.Parallel()
		p, addr := adminUp(t, serveConfig(t, t.TempDir(), 0, 0, ""))
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		type answer struct {
			status int
			err    error
		}
		answered := make(chan answer, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answered <- answer{err: err}
				return
			}
			resp.Body.Close()
			answered <- answer{status: resp.StatusCode}
		}()
		big := strings.Repeat("a", 1<<20+64<<10)
		go func() {
			_, _ = io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n")
		}()
		select {
		case a := <-answered:
			if a.err != nil || a.status != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("oversized headers on the admin listener: status %d (%v), want 431\n%s", a.status, a.err, p)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("no answer to the oversized headers")
		}
		// The next request, on a new connection, is served.
		if r := mustGet(t, newClient(), "http://"+addr+"/metrics", nil); r.status != http.StatusOK {
			t.Errorf("the request after the oversized one: status %d, want 200", r.status)
		}
	})
}

// genBody is size bytes generated on the fly.
type genBody struct{ left int64 }

func (g *genBody) Read(b []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > g.left {
		b = b[:g.left]
	}
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	g.left -= int64(len(b))
	return len(b), nil
}

// TestHugeBodiesStreamWithBoundedMemory: 512 MiB up (POST, the upstream
// counts it) and 512 MiB down (GET, the upstream generates it) keep the
// process's peak RSS under 150 MiB.
func TestHugeBodiesStreamWithBoundedMemory(t *testing.T) {
	t.Parallel()
	const size = 512 << 20
	const limit = 150 << 20
	procmem.Need(t)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			fmt.Fprint(w, n)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = io.Copy(w, &genBody{left: size})
	})
	cfg := serveConfig(t, t.TempDir(), 0, 0, "proxies:\n"+proxyYAML("api", up.URL, "")+"    timeout: 300\n")
	p, addr := serveUp(t, cfg, nil)
	pid := p.cmd.Process.Pid
	before := procmem.MustPeak(t, pid)
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{Proxy: nil}}

	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/up", &genBody{left: size})
	req.ContentLength = size
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("upload: %v\n%s", err, p)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != strconv.Itoa(size) {
		t.Fatalf("upload: status %d, the upstream counted %q bytes, want %d", res.StatusCode, body, size)
	}
	afterUp := procmem.MustPeak(t, pid)

	res, err = client.Get("http://" + addr + "/down")
	if err != nil {
		t.Fatalf("download: %v\n%s", err, p)
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || n != size {
		t.Fatalf("download: status %d, %d bytes (%v), want %d", res.StatusCode, n, err, size)
	}
	peak := procmem.MustPeak(t, pid)
	t.Logf("peak RSS: %.1f MiB at start, %.1f MiB after 512 MiB up, %.1f MiB after 512 MiB down",
		float64(before)/(1<<20), float64(afterUp)/(1<<20), float64(peak)/(1<<20))
	if peak >= limit {
		t.Errorf("peak RSS %.1f MiB, want under 150 MiB", float64(peak)/(1<<20))
	}
}
