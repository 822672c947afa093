package fault

import (
	"time"

	"github.com/doppelproxy/doppel/internal/config"
)

// The rolls of a latency: whether it fires, then the delay drawn.
const (
	RollLatency     Roll = 3
	RollLatencyDraw Roll = 4
)

func init() {
	register(Kind{
		Name: "latency", Order: 100, Rolls: []Roll{RollLatency, RollLatencyDraw},
		// It says how slow the proxy is to answer, whatever answers: a
		// mock without its own takes the proxy's.
		Inherited: true,
		Build: func(f config.Faults, _ bool) Fault {
			l := f.Latency
			if l == nil {
				return nil
			}
			return &Latency{Percentage: float64(l.Percentage), Min: seconds(float64(l.Min)), Max: seconds(float64(l.Max))}
		},
	})
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Latency makes a share of requests take a time drawn uniformly from
// [Min, Max]; the time is a target for the whole response, so what the
// answer itself took is subtracted.
type Latency struct {
	Percentage float64
	Min, Max   time.Duration
}

func (*Latency) Name() string            { return "latency" }
func (*Latency) Stage() Stage            { return After }
func (l *Latency) Roll() (Roll, float64) { return RollLatency, l.Percentage }

// Act sets the whole-response target.
func (l *Latency) Act(x Exchange, draw Draw) { x.Delay(l.draw(draw)) }

func (l *Latency) draw(draw Draw) time.Duration {
	if l.Max <= l.Min {
		return l.Min
	}
	return l.Min + time.Duration(draw.Float64(RollLatencyDraw)*float64(l.Max-l.Min+1))
}

// Target returns the whole-response time drawn for this request, or false
// when the roll does not fire.
func (l *Latency) Target(r Roller, k Key) (time.Duration, bool) {
	if l == nil {
		return 0, false
	}
	k.Roll = RollLatency
	if !Fires(r, k, l.Percentage) {
		return 0, false
	}
	return l.draw(Draw{r: r, k: k}), true
}
