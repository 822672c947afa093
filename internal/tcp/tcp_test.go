package tcp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echo is an upstream that writes back what it reads; greet, when set, is
// written first on every connection.
func echo(t *testing.T, greet []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if greet != nil {
					if _, err := c.Write(greet); err != nil {
						return
					}
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// start serves a proxy to upstream with toxics, and collects its records.
func start(t *testing.T, upstream string, toxics *Toxics) (*Proxy, string, func() []Record) {
	t.Helper()
	var mu sync.Mutex
	var recs []Record
	p := &Proxy{Name: "db", Upstream: upstream, Report: func(r Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	}}
	p.SetToxics(toxics)
	addr, err := p.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, addr.String(), func() []Record {
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(recs)
			out := slices.Clone(recs)
			mu.Unlock()
			if n > 0 || time.Now().After(deadline) {
				return out
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// roundTrip writes b and reads as many bytes back.
func roundTrip(t *testing.T, c net.Conn, b []byte) []byte {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading back %d bytes: %v", len(b), err)
	}
	return got
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func TestBytesPassBothWaysAndAreCounted(t *testing.T) {
	_, addr, records := start(t, echo(t, nil), nil)
	c := dial(t, addr)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	done := make(chan []byte)
	go func() {
		got := make([]byte, len(big))
		_, _ = io.ReadFull(c, got)
		done <- got
	}()
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !bytes.Equal(got, big) {
		t.Fatal("the bytes came back changed")
	}
	c.Close()
	recs := records()
	if len(recs) != 1 || recs[0].Up != int64(len(big)) || recs[0].Down != int64(len(big)) || recs[0].Cut || recs[0].Err != nil {
		t.Errorf("the record: %+v", recs)
	}
}

func TestLatencyDelaysEveryChunkNeverThrottles(t *testing.T) {
	_, addr, records := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: Latency{Base: 300 * time.Millisecond}, Toxicity: 1}}})
	c := dial(t, addr)
	for _, b := range []string{"ping", "pong"} {
		began := time.Now()
		roundTrip(t, c, []byte(b))
		if d := time.Since(began); d < 300*time.Millisecond {
			t.Errorf("%s came back after %v", b, d)
		}
	}
	// A stream is delayed, not throttled: 1 MiB is 32 reads of the relay
	// at least, each held 300 ms from its arrival, their waits
	// overlapping: about 300 ms and the transfer, not 300 ms a read.
	big := bytes.Repeat([]byte("m"), 1<<20)
	began := time.Now()
	go func() { _, _ = c.Write(big) }()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the stream came back changed: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("1 MiB through 300 ms of latency took %v: its chunks waited one after another", d)
	}
	c.Close()
	if recs := records(); len(recs) != 1 || !slices.Contains(recs[0].Toxics, "latency") || recs[0].Latency < 300*time.Millisecond || recs[0].Latency > 2*time.Second {
		t.Errorf("the record: %+v", recs)
	}
}

// TestALatencyTakenOutSendsWhatItHolds: a latency toxic removed while it
// holds chunks sends them at once, as Toxiproxy's does, before what
// follows.
func TestALatencyTakenOutSendsWhatItHolds(t *testing.T) {
	p, addr, _ := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: Latency{Base: 5 * time.Second}, Toxicity: 1}}})
	c := dial(t, addr)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	// The chunk is held once the echo sent it back.
	time.Sleep(100 * time.Millisecond)
	began := time.Now()
	p.SetToxics(nil)
	got := make([]byte, len("held"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("%q %v", got, err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("the held chunk came %v after the toxic was removed", d)
	}
	if got := roundTrip(t, c, []byte("after")); string(got) != "after" {
		t.Fatalf("after: %q", got)
	}
}

func TestAToxicAppliesToOpenConnections(t *testing.T) {
	p, addr, _ := start(t, echo(t, nil), nil)
	c := dial(t, addr)
	roundTrip(t, c, []byte("before"))
	p.SetToxics(&Toxics{Down: []Entry{{Toxic: Latency{Base: 250 * time.Millisecond}, Toxicity: 1}}})
	began := time.Now()
	roundTrip(t, c, []byte("after"))
	if d := time.Since(began); d < 250*time.Millisecond {
		t.Errorf("a toxic added to the proxy did not reach the open connection (%v)", d)
	}
	p.SetToxics(nil)
	began = time.Now()
	roundTrip(t, c, []byte("removed"))
	if d := time.Since(began); d > 200*time.Millisecond {
		t.Errorf("the removed toxic still applies (%v)", d)
	}
}

func TestBandwidthPaces(t *testing.T) {
	_, addr, _ := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: Bandwidth{BytesPerSecond: 100 << 10}, Toxicity: 1}}})
	c := dial(t, addr)
	began := time.Now()
	roundTrip(t, c, bytes.Repeat([]byte("x"), 50<<10))
	if d := time.Since(began); d < 400*time.Millisecond {
		t.Errorf("50 KiB at 100 KiB/s took %v", d)
	}
}

func TestLimitDataCutsAfterItsBytes(t *testing.T) {
	for _, fin := range []bool{false, true} {
		t.Run(map[bool]string{false: "reset", true: "close"}[fin], func(t *testing.T) {
			_, addr, records := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: LimitData{Bytes: 1000, Close: fin}, Toxicity: 1}}})
			c := dial(t, addr)
			if _, err := c.Write(bytes.Repeat([]byte("g"), 5000)); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if len(got) != 1000 {
				t.Errorf("%d bytes before the cut, want 1000", len(got))
			}
			if fin && err != nil || !fin && !isReset(err) {
				t.Errorf("the cut: %v", err)
			}
			if recs := records(); len(recs) != 1 || recs[0].Down != 1000 || !recs[0].Cut || recs[0].Reset == fin {
				t.Errorf("the record: %+v", recs)
			}
		})
	}
}

func TestTimeoutHoldsThenCloses(t *testing.T) {
	_, addr, _ := start(t, echo(t, []byte("hello")), &Toxics{Down: []Entry{{Toxic: Timeout{After: 300 * time.Millisecond}, Toxicity: 1}}})
	c := dial(t, addr)
	began := time.Now()
	got, err := io.ReadAll(c)
	if len(got) != 0 || err != nil || time.Since(began) < 300*time.Millisecond {
		t.Errorf("got %q, %v after %v: want nothing, then a close after 300 ms", got, err, time.Since(began))
	}
}

func TestResetPeerResets(t *testing.T) {
	_, addr, _ := start(t, echo(t, nil), &Toxics{Up: []Entry{{Toxic: ResetPeer{After: 100 * time.Millisecond}, Toxicity: 1}}})
	c := dial(t, addr)
	roundTrip(t, c, []byte("first"))
	_, err := io.ReadAll(c)
	if !isReset(err) {
		t.Errorf("after reset_peer: %v, want ECONNRESET", err)
	}
}

func TestSlicerAndSlowClose(t *testing.T) {
	up := echo(t, nil)
	_, addr, _ := start(t, up, &Toxics{Down: []Entry{
		{Toxic: Slicer{AverageSize: 100, SizeVariation: 20, Delay: 10 * time.Millisecond}, Toxicity: 1},
		{Toxic: SlowClose{Delay: 300 * time.Millisecond}, Toxicity: 1},
	}})
	c := dial(t, addr)
	msg := bytes.Repeat([]byte("s"), 2000)
	began := time.Now()
	if got := roundTrip(t, c, msg); !bytes.Equal(got, msg) {
		t.Fatal("sliced bytes changed")
	}
	if d := time.Since(began); d < 150*time.Millisecond { // about 20 slices, 10 ms apart
		t.Errorf("2,000 bytes in slices of 100 took %v", d)
	}
	// The client half-closes; the upstream's close is passed on late.
	_ = c.(*net.TCPConn).CloseWrite()
	began = time.Now()
	if _, err := io.ReadAll(c); err != nil || time.Since(began) < 300*time.Millisecond {
		t.Errorf("the close came after %v (%v), want at least 300 ms", time.Since(began), err)
	}
}

func TestToxicityZeroNeverApplies(t *testing.T) {
	_, addr, records := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: ResetPeer{}, Toxicity: 0}}})
	c := dial(t, addr)
	roundTrip(t, c, []byte("safe"))
	c.Close()
	if recs := records(); len(recs) != 1 || len(recs[0].Toxics) != 0 || recs[0].Cut {
		t.Errorf("the record: %+v", recs)
	}
}

func TestAnUnreachableUpstreamResetsAndSaysWhy(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := ln.Addr().String()
	ln.Close()
	_, addr, records := start(t, gone, nil)
	// The reset may come before the dial has returned.
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(c)
		c.Close()
	}
	if !isReset(err) {
		t.Errorf("the client: %v, want a reset", err)
	}
	recs := records()
	if len(recs) != 1 || recs[0].Err == nil || !strings.Contains(recs[0].Err.Error(), "cannot be reached") || !strings.Contains(recs[0].Err.Error(), gone) {
		t.Errorf("the record: %+v", recs)
	}
}

func TestAListenAddressInUseIsAnError(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	p := &Proxy{Name: "db", Upstream: "127.0.0.1:9"}
	if _, err := p.Listen(ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "db") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("got %v", err)
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	p, addr, records := start(t, echo(t, nil), nil)
	c := dial(t, addr)
	roundTrip(t, c, []byte("open"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("after Close: %v, want EOF", err)
	}
	if recs := records(); len(recs) != 1 {
		t.Errorf("records: %+v", recs)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("still listening after Close")
	}
}

// flakyListener fails its first Accept as an exhausted process does, then
// yields one connection, then is closed.
type flakyListener struct {
	n    int
	conn net.Conn
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.n++
	switch l.n {
	case 1:
		return nil, syscall.EMFILE
	case 2:
		return l.conn, nil
	}
	return nil, net.ErrClosed
}
func (l *flakyListener) Close() error   { return nil }
func (l *flakyListener) Addr() net.Addr { return &net.TCPAddr{} }

func TestAFailedAcceptIsNotTheEnd(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	got := make(chan Record, 1)
	p := &Proxy{Name: "db", Upstream: "127.0.0.1:1", Report: func(r Record) { got <- r }}
	done := make(chan struct{})
	go func() { p.accept(&flakyListener{conn: server}); close(done) }()
	select {
	case r := <-got:
		if r.Err == nil {
			t.Errorf("the record: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection after a failed Accept was never served")
	}
	<-done
}
