// Package fault holds the deliberate degradations and the rolls that decide
// them. Every roll goes through a Roller keyed by what is being decided, so
// that a seeded Roller can make faults a pure function of the request (a
// replayed request id gets the same faults) without the pipeline changing.
package fault

import (
	"math/rand/v2"
	"time"
)

// Roll names which decision a draw is for.
type Roll uint8

const (
	RollReplace Roll = iota + 1
	RollLoss
	RollLatency
	RollLatencyDraw
)

// Key identifies one draw.
type Key struct {
	Proxy     string
	Mock      string // empty when no mock is involved
	RequestID string
	Roll      Roll
}

// A Roller returns a number in [0, 1) for a draw.
type Roller interface {
	Float64(Key) float64
}

// Random draws independently per request from the runtime's lock-free
// generator. It is the Roller when no seed is set.
type Random struct{}

func (Random) Float64(Key) float64 { return rand.Float64() }

// Fires reports whether a share p fires: 0 never does, 1 always does.
func Fires(r Roller, k Key, p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	return r.Float64(k) < p
}

// Loss drops a share of requests with a status.
type Loss struct {
	Percentage float64
	Status     int
}

// Fires reports whether this request is dropped.
func (l *Loss) Fires(r Roller, k Key) bool {
	if l == nil {
		return false
	}
	k.Roll = RollLoss
	return Fires(r, k, l.Percentage)
}

// Latency makes a share of requests take a time drawn uniformly from
// [Min, Max]; the time is a target for the whole response.
type Latency struct {
	Percentage float64
	Min, Max   time.Duration
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
	if l.Max <= l.Min {
		return l.Min, true
	}
	k.Roll = RollLatencyDraw
	return l.Min + time.Duration(r.Float64(k)*float64(l.Max-l.Min+1)), true
}

// Replace is the share of matching requests a mock answers.
type Replace float64

// Fires reports whether the mock answers this request.
func (p Replace) Fires(r Roller, k Key) bool {
	k.Roll = RollReplace
	return Fires(r, k, float64(p))
}
