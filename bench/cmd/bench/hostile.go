package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"time"
)

// Bad input beside the exact delay: clients that open connections and
// send nothing, and clients that ask for a delayed 1 MiB answer and never
// read it, all held open for the whole run, while the generator measures
// everybody else's 200 ms delay.

// hostileClients are such connections, opened before a run and closed
// after it.
type hostileClients struct {
	conns []net.Conn
}

// openHostile opens idle connections that send nothing and stalled ones
// that send `GET /large` (delayed 1 s by doppel-delay's default proxy, a
// body too large to be held) and never read, with a small receive buffer
// so that the answer backs up into Doppel at once.
func openHostile(ctx context.Context, base string, idle, stalled int) (*hostileClients, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	h := &hostileClients{}
	// From 127.0.0.2: their ports, thousands of them, never take one a
	// server must listen on.
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for i := range idle + stalled {
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			h.close()
			return nil, fmt.Errorf("connection %d of %d idle and %d stalled: %w", i+1, idle, stalled, err)
		}
		h.conns = append(h.conns, c)
		if i < idle {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		if _, err := io.WriteString(c, "GET /large HTTP/1.1\r\nHost: bench\r\n\r\n"); err != nil {
			h.close()
			return nil, fmt.Errorf("a stalled client's request: %w", err)
		}
	}
	return h, nil
}

// close resets them: a reset leaves no TIME_WAIT behind, so the next
// run finds its ports free.
func (h *hostileClients) close() {
	for _, c := range h.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	h.conns = nil
}

// raiseFileLimit lets this process and the servers it starts hold n
// descriptors each, raising the hard limit too when it may (as root). It
// returns the limit in force.
func raiseFileLimit(n uint64) uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur >= n {
		return l.Cur
	}
	want := syscall.Rlimit{Cur: n, Max: max(n, l.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want = syscall.Rlimit{Cur: l.Max, Max: l.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return l.Cur
		}
	}
	return want.Cur
}

// checkFileLimit fails early when -idle-conns and -stalled-conns, with
// what the run itself needs, do not fit in the descriptors allowed.
func checkFileLimit(idle, stalled int) error {
	// Doppel holds each, a stalled one's upstream connection too, the
	// generator's and its own.
	need := uint64(idle+2*stalled) + 1024
	if got := raiseFileLimit(need); got < need {
		return fmt.Errorf("-idle-conns %d and -stalled-conns %d need %d file descriptors, %d are allowed (ulimit -n; as root the benchmark raises it)", idle, stalled, need, got)
	}
	return nil
}

// hostileCase names the exact-delay run beside them.
func hostileCase(cfg *config) string {
	return fmt.Sprintf("the same beside %d idle and %d stalled connections", cfg.idleConns, cfg.stalledConns)
}
