package fault

import (
	"fmt"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
)

// RollLoss decides a loss.
const RollLoss Roll = 2

func init() {
	register(Kind{
		Name: "loss", Order: 10, Rolls: []Roll{RollLoss},
		Build: func(f config.Faults) Fault {
			if f.Loss == nil {
				return nil
			}
			return &Loss{Percentage: float64(f.Loss.Percentage), Status: int(f.Loss.Status)}
		},
	})
}

// Loss drops a share of requests with a status, at once: a dropped request
// is never delayed.
type Loss struct {
	Percentage float64
	Status     int
}

func (*Loss) Name() string            { return "loss" }
func (*Loss) Stage() Stage            { return Before }
func (l *Loss) Roll() (Roll, float64) { return RollLoss, l.Percentage }

// Act answers with the loss status and LOSS_INJECTED.
func (l *Loss) Act(x Exchange, _ Draw) {
	x.Fail(l.Status, apierr.LossInjected, fmt.Sprintf("request dropped by injected loss (status %d)", l.Status))
}

// Fires reports whether this request is dropped.
func (l *Loss) Fires(r Roller, k Key) bool {
	if l == nil {
		return false
	}
	k.Roll = RollLoss
	return Fires(r, k, l.Percentage)
}
