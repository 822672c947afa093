// Command latencyload measures a latency toxic at scale, Toxiproxy and
// Doppel side by side (docs/performance.md): one proxy made through
// Toxiproxy's API with a latency toxic of 1 s downstream, and 2,000
// connections at once, each sending 64 KiB to an echo upstream and
// reading it back. It reports each server's times (p50, p99, max, and
// what the toxic added at p50 over the same run without it) and its
// memory per connection: its peak resident memory over its resident
// memory before, divided by the connections.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

func main() {
	doppel := flag.String("doppel", "bench/.cache/bin/doppel", "Doppel's binary")
	toxiproxy := flag.String("toxiproxy", "bench/.cache/bin/server", "Toxiproxy's server binary")
	conns := flag.Int("conns", 2000, "connections at once")
	size := flag.Int("size", 64<<10, "bytes each connection sends and reads back")
	latency := flag.Duration("latency", time.Second, "the latency toxic, downstream")
	flag.Parse()
	up, err := echoUpstream()
	if err != nil {
		fail(err)
	}
	fmt.Printf("### A latency toxic of %v, %d connections at once, %d KiB each (bench/cmd/latencyload)\n\n", *latency, *conns, *size>>10)
	fmt.Println("| server | p50 without the toxic | p50 | p99 | max | added at p50 | peak RSS over idle | per connection |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, target := range []struct {
		name  string
		start func(port int, dir string) *exec.Cmd
	}{
		{"toxiproxy", func(port int, _ string) *exec.Cmd {
			c := exec.Command(*toxiproxy, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
			c.Env = append(os.Environ(), "LOG_LEVEL=error")
			return c
		}},
		{"doppel", func(port int, dir string) *exec.Cmd {
			ports := freePorts(2)
			cfg := filepath.Join(dir, "doppel.yaml")
			doc := fmt.Sprintf("server: {host: 127.0.0.1, port: %d}\nadmin: {host: 127.0.0.1, port: %d}\ntoxiproxy: {host: 127.0.0.1, port: %d}\nproxies: []\n", ports[0], ports[1], port)
			if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
				fail(err)
			}
			c := exec.Command(*doppel, "serve", "--config", cfg, "--socket", filepath.Join(dir, "doppel.sock"))
			c.Env = append(os.Environ(), "DOPPEL_LOG=error")
			return c
		}},
	} {
		// Without the toxic first: what moving the bytes costs the
		// machine, client and upstream included.
		bare, err := measure(target.start, up, *conns, *size, 0)
		if err != nil {
			fail(fmt.Errorf("%s: %w", target.name, err))
		}
		r, err := measure(target.start, up, *conns, *size, *latency)
		if err != nil {
			fail(fmt.Errorf("%s: %w", target.name, err))
		}
		fmt.Printf("| %s | %v | %v | %v | %v | %v | %.1f MiB | %.1f KiB |\n", target.name,
			bare.p50.Round(time.Millisecond), r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond),
			(r.p50 - bare.p50).Round(time.Millisecond), float64(r.grew)/(1<<20), float64(r.grew)/float64(*conns)/1024)
	}
}

type result struct {
	p50, p99, max time.Duration
	grew          int64 // bytes: peak resident over idle
}

func measure(start func(port int, dir string) *exec.Cmd, upstream string, conns, size int, latency time.Duration) (result, error) {
	dir, err := os.MkdirTemp("", "latencyload")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	port := freePorts(1)[0]
	cmd := start(port, dir)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitUp(api + "/version"); err != nil {
		return result{}, err
	}
	c := toxiclient.NewClient(api)
	proxy, err := c.CreateProxy("lat", "127.0.0.1:0", upstream)
	if err != nil {
		return result{}, err
	}
	if latency > 0 {
		if _, err := proxy.AddToxic("lat", "latency", "downstream", 1, toxiclient.Attributes{"latency": latency.Milliseconds()}); err != nil {
			return result{}, err
		}
	}
	time.Sleep(200 * time.Millisecond) // settled: the idle figure
	idle, err := memory(cmd.Process.Pid, "VmRSS")
	if err != nil {
		return result{}, err
	}
	payload := make([]byte, size)
	times := make([]time.Duration, conns)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	hold := make(chan struct{}) // the connections stay open until all are read back
	var read sync.WaitGroup
	read.Add(conns)
	for i := range conns {
		wg.Go(func() {
			conn, err := net.Dial("tcp", proxy.Listen)
			if err != nil {
				errs[i] = err
				read.Done()
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			began := time.Now()
			go func() { _, _ = conn.Write(payload) }()
			_, err = io.ReadFull(conn, make([]byte, size))
			times[i], errs[i] = time.Since(began), err
			read.Done()
			<-hold
		})
	}
	read.Wait()
	close(hold)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return result{}, fmt.Errorf("a connection failed: %w", err)
	}
	peak, err := memory(cmd.Process.Pid, "VmHWM")
	if err != nil {
		return result{}, err
	}
	slices.Sort(times)
	return result{p50: times[len(times)/2], p99: times[len(times)*99/100], max: times[len(times)-1], grew: peak - idle}, nil
}

// memory reads a figure of /proc/pid/status, in bytes.
func memory(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func echoUpstream() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), nil
}

func waitUp(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if res, err := http.Get(url); err == nil {
			res.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within 30 s", url)
}

func freePorts(n int) []int {
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "latencyload:", err)
	os.Exit(1)
}
