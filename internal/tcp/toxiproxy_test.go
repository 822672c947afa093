package tcp

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// Toxiproxy's latency: every chunk waits Each, give or take Spread.
func TestLatencySpreadIsAroundEach(t *testing.T) {
	_, addr, _ := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: Latency{Base: 200 * time.Millisecond, Spread: 100 * time.Millisecond}, Toxicity: 1}}})
	c := dial(t, addr)
	var least, most time.Duration = time.Hour, 0
	for range 6 {
		began := time.Now()
		roundTrip(t, c, []byte("ping"))
		d := time.Since(began)
		least, most = min(least, d), max(most, d)
	}
	if least < 100*time.Millisecond || most > 400*time.Millisecond {
		t.Errorf("round trips took %v to %v, want each within 200ms ± 100ms", least, most)
	}
}

// Toxiproxy's reset_peer: the time starts with the first bytes, which do
// not pass.
func TestResetPeerOnDataWaitsForTheFirstBytes(t *testing.T) {
	_, addr, _ := start(t, echo(t, nil), &Toxics{Down: []Entry{{Toxic: ResetPeer{After: 100 * time.Millisecond, OnData: true}, Toxicity: 1}}})
	c := dial(t, addr)
	time.Sleep(250 * time.Millisecond)
	began := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("the connection was reset before any bytes: %v", err)
	}
	got, err := io.ReadAll(c)
	if !isReset(err) || len(got) != 0 {
		t.Fatalf("after the first bytes: %q, %v; want nothing and ECONNRESET", got, err)
	}
	if d := time.Since(began); d < 80*time.Millisecond {
		t.Errorf("reset after %v, want about 100ms after the first bytes", d)
	}
}

// A toxic removed before its time is up does nothing: the connection
// lives on.
func TestAResetPeerRemovedBeforeItsTimeDoesNothing(t *testing.T) {
	p, addr, _ := start(t, echo(t, nil), &Toxics{Up: []Entry{{Toxic: ResetPeer{After: 200 * time.Millisecond}, Toxicity: 1}}})
	c := dial(t, addr)
	roundTrip(t, c, []byte("first"))
	p.SetToxics(nil)
	time.Sleep(350 * time.Millisecond)
	if got := roundTrip(t, c, []byte("later")); string(got) != "later" {
		t.Fatalf("after the toxic went: %q", got)
	}
}

// Toxiproxy's timeout, removed, closes the connection it held, at once.
func TestATimeoutRemovedClosesTheConnection(t *testing.T) {
	p, addr, _ := start(t, echo(t, nil), &Toxics{Up: []Entry{{Toxic: Timeout{}, Toxicity: 1}}})
	c := dial(t, addr)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	p.SetToxics(&Toxics{Up: []Entry{{Toxic: Timeout{}, Toxicity: 1}}, Down: []Entry{{Toxic: Latency{}, Toxicity: 1}}})
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("with the timeout still in force: %d bytes, %v; want nothing until the deadline", n, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	p.SetToxics(nil)
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("the timeout removed: %q, %v; want the connection closed", got, err)
	}
}

// Toxiproxy closes a client's connection whose upstream cannot be
// reached (the client reads EOF); Doppel's own proxies reset it.
func TestAnUnreachableUpstreamClosesOrResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	for _, closes := range []bool{true, false} {
		p := &Proxy{Name: "db", Upstream: down, CloseUnreachable: closes}
		addr, err := p.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		// A reset may come before the dial has returned.
		c, err := net.Dial("tcp", addr.String())
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = io.ReadAll(c)
			c.Close()
		}
		if closes && err != nil || !closes && !isReset(err) {
			t.Errorf("CloseUnreachable %v: the client read %v", closes, err)
		}
	}
}

// A timeout is the connection's from the moment it is added, data or
// not: added and removed before a byte passes, it closes the connection,
// and its time runs from when it was added.
func TestATimeoutReachesAnIdleConnection(t *testing.T) {
	p, addr, _ := start(t, echo(t, nil), nil)
	c := dial(t, addr)
	roundTrip(t, c, []byte("before"))
	p.SetToxics(&Toxics{Up: []Entry{{Toxic: Timeout{}, Toxicity: 1}}})
	p.SetToxics(nil)
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("added and removed: %q, %v; want the connection closed", got, err)
	}
	c = dial(t, addr)
	roundTrip(t, c, []byte("before"))
	began := time.Now()
	p.SetToxics(&Toxics{Down: []Entry{{Toxic: Timeout{After: 200 * time.Millisecond}, Toxicity: 1}}})
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 || time.Since(began) < 150*time.Millisecond {
		t.Fatalf("a timeout of 200 ms on an idle connection: %q, %v after %v", got, err, time.Since(began))
	}
}

// A Toxiproxy toxic changed is the same toxic, run anew: a timeout whose
// time changes keeps the connection, its new time running from then.
func TestAChangedTimeoutKeepsTheConnection(t *testing.T) {
	p, addr, _ := start(t, echo(t, nil), &Toxics{Up: []Entry{{Toxic: Timeout{}, Toxicity: 1, Name: "t"}}})
	c := dial(t, addr)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	p.SetToxics(&Toxics{Up: []Entry{{Toxic: Timeout{After: 300 * time.Millisecond}, Toxicity: 1, Name: "t"}}})
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 || time.Since(began) < 250*time.Millisecond {
		t.Fatalf("changed to 300 ms: %q, %v after %v; want the end 300 ms after the change", got, err, time.Since(began))
	}
}

// Another toxic added or removed leaves a latency in force as it is: what
// it holds still waits its time.
func TestALatencyStaysWhenAnotherToxicChanges(t *testing.T) {
	lat := Entry{Toxic: Latency{Base: 600 * time.Millisecond}, Toxicity: 1}
	p, addr, _ := start(t, echo(t, nil), &Toxics{Down: []Entry{lat}})
	c := dial(t, addr)
	began := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	p.SetToxics(&Toxics{Up: []Entry{{Toxic: Bandwidth{BytesPerSecond: 1 << 30}, Toxicity: 1}}, Down: []Entry{lat}})
	// Bytes after the change: each direction's chain is built again.
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("%q %v", got, err)
	}
	if d := time.Since(began); d < 550*time.Millisecond {
		t.Errorf("the held chunk came after %v: another toxic's change let it skip its latency", d)
	}
}

// A toxic keeps its state when another is added, as Toxiproxy's do:
// limit_data goes on counting.
func TestAToxicKeepsItsCountWhenAnotherIsAdded(t *testing.T) {
	limit := Entry{Toxic: LimitData{Bytes: 10, Close: true}, Toxicity: 1, Name: "limit"}
	p, addr, _ := start(t, echo(t, nil), &Toxics{Down: []Entry{limit}})
	c := dial(t, addr)
	if got := roundTrip(t, c, []byte("123456")); string(got) != "123456" {
		t.Fatalf("the first six bytes: %q", got)
	}
	p.SetToxics(&Toxics{Down: []Entry{{Toxic: Bandwidth{BytesPerSecond: 1 << 30}, Toxicity: 1, Name: "wide"}, limit}})
	if _, err := c.Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	if string(got) != "abcd" {
		t.Fatalf("after another toxic was added, %q came back: want the 4 bytes left of the 10, then the end", got)
	}
}
