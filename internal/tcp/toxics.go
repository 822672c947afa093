package tcp

import (
	"errors"
	"math/rand/v2"
	"time"
)

// A Toxic shapes one direction of a connection's bytes: Toxiproxy's word
// and shape, one small value each, registered by name. The relay writes
// every chunk it reads through the chain of the direction's toxics, each
// wrapping the next (the last one writes to the peer), so a toxic only
// knows the bytes it is handed and the writer after it.
type Toxic interface {
	// Name is the toxic's type (latency, bandwidth, ...).
	Name() string
	// Wrap puts the toxic in front of next for one connection's direction;
	// l is the connection, for the toxics that cut or hold it.
	Wrap(next writer, l *Link) writer
}

// writer is one stage of a direction's chain.
type writer interface {
	Write(b []byte) error
	// Close is called when the source side ended (EOF): the stage may
	// delay or refuse passing it on.
	Close() error
}

// errCut ends a direction a toxic cut.
var errCut = errors.New("the connection was cut by an injected fault")

// Latency delays the bytes: Initial once, before the first byte passes
// (a uniform draw up to InitialMax when that is more), then Jitter (a
// uniform draw in [0, Jitter)) on every chunk; Each adds a fixed delay to
// every chunk, as Toxiproxy's latency does, and Spread a uniform draw in
// [-Spread, +Spread) around it (Toxiproxy's jitter), never below zero.
type Latency struct {
	Initial, InitialMax time.Duration
	Each                time.Duration
	Jitter              time.Duration
	Spread              time.Duration
}

func (Latency) Name() string { return "latency" }

func (t Latency) Wrap(next writer, l *Link) writer {
	if t.InitialMax > t.Initial {
		t.Initial += time.Duration(rand.Int64N(int64(t.InitialMax - t.Initial)))
	}
	return &latencyWriter{t: t, next: next, l: l, first: true}
}

type latencyWriter struct {
	t     Latency
	next  writer
	l     *Link
	first bool
}

func (w *latencyWriter) Write(b []byte) error {
	d := w.t.Each
	if w.first {
		d += w.t.Initial
		w.first = false
	}
	if w.t.Jitter > 0 {
		d += time.Duration(rand.Int64N(int64(w.t.Jitter)))
	}
	if w.t.Spread > 0 {
		d += time.Duration(rand.Int64N(2*int64(w.t.Spread))) - w.t.Spread
	}
	if d > 0 {
		began := time.Now()
		done := w.l.sleep(d)
		w.l.waited.Add(int64(time.Since(began)))
		if !done {
			return errCut
		}
	}
	return w.next.Write(b)
}

func (w *latencyWriter) Close() error { return w.next.Close() }

// Bandwidth paces the bytes to BytesPerSecond.
type Bandwidth struct{ BytesPerSecond int64 }

func (Bandwidth) Name() string { return "bandwidth" }

func (t Bandwidth) Wrap(next writer, l *Link) writer {
	return &bandwidthWriter{rate: max(t.BytesPerSecond, 1), next: next, l: l}
}

type bandwidthWriter struct {
	rate int64
	next writer
	l    *Link
	// due is when what was written so far may have arrived at the rate.
	due time.Time
}

// bandwidthSlice bounds one paced write: a slow rate sends small pieces
// rather than one burst after a long wait.
const bandwidthSlice = 16 << 10

func (w *bandwidthWriter) Write(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), int(max(w.rate/10, 1)), bandwidthSlice)
		now := time.Now()
		if w.due.Before(now) {
			w.due = now
		}
		w.due = w.due.Add(time.Duration(int64(n) * int64(time.Second) / w.rate))
		if d := time.Until(w.due); d > 0 && !w.l.sleep(d) {
			return errCut
		}
		if err := w.next.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (w *bandwidthWriter) Close() error { return w.next.Close() }

// Slicer cuts the bytes into slices of about AverageSize (± SizeVariation)
// with Delay between them, as a slow network splits segments.
type Slicer struct {
	AverageSize, SizeVariation int
	Delay                      time.Duration
}

func (Slicer) Name() string { return "slicer" }

func (t Slicer) Wrap(next writer, l *Link) writer { return &slicerWriter{t: t, next: next, l: l} }

type slicerWriter struct {
	t    Slicer
	next writer
	l    *Link
}

func (w *slicerWriter) Write(b []byte) error {
	for len(b) > 0 {
		n := max(w.t.AverageSize, 1)
		if v := w.t.SizeVariation; v > 0 {
			n += rand.IntN(2*v+1) - v
		}
		n = min(max(n, 1), len(b))
		if err := w.next.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
		if len(b) > 0 && w.t.Delay > 0 && !w.l.sleep(w.t.Delay) {
			return errCut
		}
	}
	return nil
}

func (w *slicerWriter) Close() error { return w.next.Close() }

// LimitData cuts the connection once Bytes have passed this way: a reset,
// or a FIN with Close.
type LimitData struct {
	Bytes int64
	Close bool
}

func (LimitData) Name() string { return "limit_data" }

func (t LimitData) Wrap(next writer, l *Link) writer {
	return &limitWriter{left: t.Bytes, fin: t.Close, next: next, l: l}
}

type limitWriter struct {
	left int64
	fin  bool
	next writer
	l    *Link
}

func (w *limitWriter) Write(b []byte) error {
	if int64(len(b)) <= w.left {
		w.left -= int64(len(b))
		if err := w.next.Write(b); err != nil {
			return err
		}
		if w.left == 0 {
			w.l.Cut(!w.fin)
			return errCut
		}
		return nil
	}
	if w.left > 0 {
		if err := w.next.Write(b[:w.left]); err != nil {
			return err
		}
		w.left = 0
	}
	w.l.Cut(!w.fin)
	return errCut
}

func (w *limitWriter) Close() error { return w.next.Close() }

// Timeout stops every byte this way; after After the connection is closed
// (a FIN), and with After 0 it is held until the toxic goes or a side
// leaves.
type Timeout struct{ After time.Duration }

func (Timeout) Name() string { return "timeout" }

func (t Timeout) Wrap(next writer, l *Link) writer {
	if t.After > 0 {
		l.after(t.After, func() {
			if l.holds(t) {
				l.Cut(false)
			}
		})
	}
	return dropWriter{}
}

type dropWriter struct{}

func (dropWriter) Write([]byte) error { return nil }
func (dropWriter) Close() error       { return nil }

// ResetPeer resets the connection (a TCP RST) After its start, or at once.
// With OnData, as Toxiproxy's reset_peer, the time starts with the first
// bytes this way instead, and from then on nothing passes.
type ResetPeer struct {
	After  time.Duration
	OnData bool
}

func (ResetPeer) Name() string { return "reset_peer" }

func (t ResetPeer) Wrap(next writer, l *Link) writer {
	if t.OnData {
		return &resetOnDataWriter{t: t, l: l}
	}
	l.after(t.After, func() {
		if l.holds(t) {
			l.Cut(true)
		}
	})
	return next
}

// resetOnDataWriter drops what it is handed, and resets the connection
// after its time from the first bytes.
type resetOnDataWriter struct {
	t       ResetPeer
	l       *Link
	started bool
}

func (w *resetOnDataWriter) Write([]byte) error {
	if w.started {
		return nil
	}
	w.started = true
	if w.t.After <= 0 {
		w.l.Cut(true)
		return errCut
	}
	w.l.after(w.t.After, func() {
		if w.l.holds(w.t) {
			w.l.Cut(true)
		}
	})
	return nil
}

func (w *resetOnDataWriter) Close() error { return nil }

// SlowClose delays passing the source's close on by Delay.
type SlowClose struct{ Delay time.Duration }

func (SlowClose) Name() string { return "slow_close" }

func (t SlowClose) Wrap(next writer, l *Link) writer {
	return &slowCloseWriter{d: t.Delay, next: next, l: l}
}

type slowCloseWriter struct {
	d    time.Duration
	next writer
	l    *Link
}

func (w *slowCloseWriter) Write(b []byte) error { return w.next.Write(b) }

func (w *slowCloseWriter) Close() error {
	if !w.l.sleep(w.d) {
		return errCut
	}
	return w.next.Close()
}
