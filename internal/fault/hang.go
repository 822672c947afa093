package fault

import (
	"time"

	"github.com/doppelproxy/doppel/internal/config"
)

// RollHang decides a hang.
const RollHang Roll = 6

func init() {
	register(Kind{
		Name: "hang", Order: 30, Rolls: []Roll{RollHang},
		Build: func(f config.Faults, _ bool) Fault {
			if f.Hang == nil {
				return nil
			}
			return &Hang{Percentage: float64(f.Hang.Percentage), Duration: seconds(float64(f.Hang.Seconds))}
		},
	})
}

// Hang reads the request and answers nothing for Duration, then closes
// the connection; the upstream is never contacted.
type Hang struct {
	Percentage float64
	Duration   time.Duration
}

func (*Hang) Name() string             { return "hang" }
func (*Hang) Stage() Stage             { return Before }
func (h *Hang) Roll() (Roll, float64)  { return RollHang, h.Percentage }
func (h *Hang) Act(x Exchange, _ Draw) { x.Hang(h.Duration) }
