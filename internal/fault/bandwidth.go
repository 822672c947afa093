package fault

import (
	"context"
	"net/http"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
)

// RollBandwidth decides a bandwidth.
const RollBandwidth Roll = 7

func init() {
	register(Kind{
		Name: "bandwidth", Order: 40, Rolls: []Roll{RollBandwidth},
		Build: func(f config.Faults, _ bool) Fault {
			if f.Bandwidth == nil {
				return nil
			}
			return &Bandwidth{Percentage: float64(f.Bandwidth.Percentage), Rate: int64(f.Bandwidth.BytesPerSecond)}
		},
	})
}

// Bandwidth paces an answer's body to Rate bytes per second, in slices
// that each leave at once, so nothing of the body waits in a buffer.
type Bandwidth struct {
	Percentage float64
	Rate       int64
}

func (*Bandwidth) Name() string            { return "bandwidth" }
func (*Bandwidth) Stage() Stage            { return On }
func (b *Bandwidth) Roll() (Roll, float64) { return RollBandwidth, b.Percentage }

func (b *Bandwidth) Act(x Exchange, _ Draw) {
	x.Wrap(func(w http.ResponseWriter) http.ResponseWriter {
		return &pacer{next: w, rate: b.Rate, slice: sliceOf(b.Rate), ctx: x.Context()}
	})
}

// paceSlices is how many slices a second of body is sent in: the pace is
// exact to 1/paceSlices s at any point of the body.
const paceSlices = 20

// maxSlice bounds a slice, so that a fast rate still sends in steps.
const maxSlice = 16 << 10

func sliceOf(rate int64) int {
	return int(min(max(rate/paceSlices, 1), maxSlice))
}

// pacer writes each slice, sends it, then waits until the body so far is
// due at the rate: its clock starts with the first byte of body, so a
// latency still counts to the first byte.
type pacer struct {
	next  http.ResponseWriter
	rate  int64
	slice int
	ctx   context.Context
	start time.Time
	sent  int64
	timer *time.Timer
}

func (p *pacer) Header() http.Header         { return p.next.Header() }
func (p *pacer) WriteHeader(code int)        { p.next.WriteHeader(code) }
func (p *pacer) Unwrap() http.ResponseWriter { return p.next }
func (p *pacer) Flush()                      { _ = http.NewResponseController(p.next).Flush() }

func (p *pacer) Write(b []byte) (int, error) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	rc := http.NewResponseController(p.next)
	written := 0
	for len(b) > 0 {
		k := min(len(b), p.slice)
		n, err := p.next.Write(b[:k])
		written += n
		p.sent += int64(n)
		if err != nil {
			return written, err
		}
		b = b[k:]
		_ = rc.Flush()
		if err := p.wait(); err != nil {
			return written, err
		}
	}
	return written, nil
}

// wait waits until what was sent is due, or the client leaves.
func (p *pacer) wait() error {
	due := p.start.Add(time.Duration(float64(p.sent) / float64(p.rate) * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return nil
	case <-p.ctx.Done():
		p.timer.Stop()
		return context.Cause(p.ctx)
	}
}
