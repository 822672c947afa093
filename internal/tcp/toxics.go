package tcp

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
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
	// Release is called when the chain is replaced (a toxic added or
	// removed): the stage passes on at once what it holds, and is not
	// used again; a stage whose toxic was removed may end the connection,
	// as Toxiproxy's cleanup of that toxic does.
	Release() error
}

// errCut ends a direction a toxic cut.
var errCut = errors.New("the connection was cut by an injected fault")

// Latency delays every chunk by the same time from the moment it arrived,
// as a slow link does: a stream is delayed, never throttled. The delay is
// Base, or a uniform draw in [Base, BaseMax) when BaseMax is more, drawn
// once per connection; each chunk adds Jitter (a uniform draw in
// [0, Jitter)) and Spread (a uniform draw in [-Spread, +Spread),
// Toxiproxy's jitter), never below zero. Chunks wait in order, at most
// latencyQueue of them; past it, the relay stops reading until the
// oldest has gone.
type Latency struct {
	Base, BaseMax time.Duration
	Jitter        time.Duration
	Spread        time.Duration
}

func (Latency) Name() string { return "latency" }

func (t Latency) Wrap(next writer, l *Link) writer {
	w := &latencyWriter{t0: t, t: t, next: next, l: l}
	if t.BaseMax > t.Base {
		w.t.Base += time.Duration(rand.Int64N(int64(t.BaseMax - t.Base)))
	}
	return w
}

// latencyQueue bounds the chunks a direction's latency holds, as
// Toxiproxy's latency buffers 1,024.
const latencyQueue = 1024

// latencyWriter holds each chunk until its time, in a goroutine of its
// own, so that the relay reads on meanwhile.
type latencyWriter struct {
	t0      Latency // the toxic, as the proxy holds it
	t       Latency // with its draw
	next    writer
	l       *Link
	queue   chan heldChunk
	hurry   chan struct{} // closed by a release: what is held goes at once
	ended   chan struct{} // closed when the goroutine returned
	err     error         // the goroutine's, read after ended or by it
	failed  atomic.Bool   // err is set
	longest time.Duration // the longest a chunk was held (the goroutine's)
}

// heldChunk is a chunk and when it may go; a chunk without bytes ends the
// writer: close passes the source's end on, else (a release) what is
// queued goes at once.
type heldChunk struct {
	b       []byte
	arrived time.Time
	due     time.Time
	end     bool
	close   bool
}

func (w *latencyWriter) delay() time.Duration {
	d := w.t.Base
	if w.t.Jitter > 0 {
		d += time.Duration(rand.Int64N(int64(w.t.Jitter)))
	}
	if w.t.Spread > 0 {
		d += time.Duration(rand.Int64N(2*int64(w.t.Spread))) - w.t.Spread
	}
	return max(d, 0)
}

func (w *latencyWriter) Write(b []byte) error {
	if w.failed.Load() {
		return w.err
	}
	if w.queue == nil {
		w.queue, w.hurry, w.ended = make(chan heldChunk, latencyQueue), make(chan struct{}), make(chan struct{})
		go w.run()
	}
	now := time.Now()
	select {
	case w.queue <- heldChunk{b: append([]byte(nil), b...), arrived: now, due: now.Add(w.delay())}:
		return nil
	case <-w.ended:
		return w.err
	case <-w.l.done:
		return errCut
	}
}

// run writes each chunk at its time, until an end, a failed write or
// the link's end.
func (w *latencyWriter) run() {
	defer close(w.ended)
	removed := false // the toxic was removed: nothing waits any more
	for {
		var c heldChunk
		select {
		case c = <-w.queue:
		case <-w.l.done:
			w.fail(errCut)
			return
		}
		if c.end {
			if c.close && w.err == nil {
				w.err = w.next.Close()
			}
			return
		}
		if w.err != nil {
			continue // failed: what the relay still hands is dropped
		}
		if !removed && !w.l.planned {
			// Removed since the last change seen: nothing waits.
			removed = !w.l.holds(w.t0)
		}
		if d := time.Until(c.due); d > 0 && !removed {
			var changed <-chan struct{} // a plan's toxics never change
			if !w.l.planned {
				changed = w.l.proxy.changes()
			}
			t := time.NewTimer(d)
		wait:
			for {
				select {
				case <-t.C:
				case <-w.hurry:
				case <-changed:
					// Removed, it sends what it holds at once, as
					// Toxiproxy's does; else it waits on.
					if removed = !w.l.holds(w.t0); !removed {
						changed = w.l.proxy.changes()
						continue
					}
				case <-w.l.done:
					t.Stop()
					w.fail(errCut)
					return
				}
				break wait
			}
			t.Stop()
		}
		if held := time.Since(c.arrived); held > w.longest {
			w.l.waited.Add(int64(held - w.longest))
			w.longest = held
		}
		if err := w.next.Write(c.b); err != nil {
			w.fail(err)
		}
	}
}

func (w *latencyWriter) fail(err error) {
	if w.err == nil {
		w.err = err
		w.failed.Store(true)
	}
}

// finish ends the goroutine: after what is queued, at its time, with the
// source's end passed on (close), or at once (a release).
func (w *latencyWriter) finish(close bool) error {
	if w.queue == nil {
		if close {
			return w.next.Close()
		}
		return nil
	}
	select {
	case w.queue <- heldChunk{end: true, close: close}:
	case <-w.ended:
	case <-w.l.done:
		return errCut
	}
	<-w.ended
	return w.err
}

func (w *latencyWriter) Close() error { return w.finish(true) }

// Release passes on what is held, then releases the rest of the chain:
// at once when the toxic was removed, as Toxiproxy's latency does; still
// in force (another toxic changed), each chunk at its time.
func (w *latencyWriter) Release() error {
	if w.queue != nil && !w.l.holds(w.t0) {
		close(w.hurry)
	}
	if err := w.finish(false); err != nil {
		return err
	}
	return w.next.Release()
}

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
	// owed is how long what was written so far should have taken at the
	// rate beyond the time already waited: a wait that overran is made
	// up on the next (owed below zero), a pause of the source is not.
	owed time.Duration
}

// bandwidthSlice bounds one paced write: a slow rate sends small pieces
// rather than one burst after a long wait.
const bandwidthSlice = 16 << 10

func (w *bandwidthWriter) Write(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), int(max(w.rate/10, 1)), bandwidthSlice)
		w.owed += time.Duration(int64(n) * int64(time.Second) / w.rate)
		if w.owed > 0 {
			began := time.Now()
			if !w.l.sleep(w.owed) {
				return errCut
			}
			w.owed -= time.Since(began)
		}
		if err := w.next.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (w *bandwidthWriter) Close() error       { return w.next.Close() }
func (w *bandwidthWriter) relink(next writer) { w.next = next }
func (w *bandwidthWriter) Release() error     { return w.next.Release() }

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

func (w *slicerWriter) Close() error       { return w.next.Close() }
func (w *slicerWriter) relink(next writer) { w.next = next }
func (w *slicerWriter) Release() error     { return w.next.Release() }

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

func (w *limitWriter) Close() error       { return w.next.Close() }
func (w *limitWriter) relink(next writer) { w.next = next }
func (w *limitWriter) Release() error     { return w.next.Release() }

// Timeout stops every byte this way; after After the connection is closed
// (a FIN), and with After 0 it is held until the toxic goes or a side
// leaves. As Toxiproxy's, it is the connection's from the moment it is
// added, data or not: its time runs from then, and removed, it closes the
// connection (Link.noteTimeouts).
type Timeout struct{ After time.Duration }

func (Timeout) Name() string { return "timeout" }

func (t Timeout) Wrap(next writer, l *Link) writer {
	if l.planned && t.After > 0 {
		l.after(t.After, func() { l.Cut(false) })
	}
	return timeoutWriter{}
}

// timeoutWriter drops what it is handed.
type timeoutWriter struct{}

func (timeoutWriter) Write([]byte) error { return nil }
func (timeoutWriter) Close() error       { return nil }
func (timeoutWriter) Release() error     { return nil }

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

func (w *resetOnDataWriter) Close() error   { return nil }
func (w *resetOnDataWriter) Release() error { return nil }
func (w *resetOnDataWriter) relink(writer)  {}

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
func (w *slowCloseWriter) relink(next writer)   { w.next = next }
func (w *slowCloseWriter) Release() error       { return w.next.Release() }

func (w *slowCloseWriter) Close() error {
	if !w.l.sleep(w.d) {
		return errCut
	}
	return w.next.Close()
}
