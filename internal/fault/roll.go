package fault

import "math/rand/v2"

// Roll names which decision a draw is for. Each fault's file declares the
// rolls it makes; registering two faults with one roll is refused, so no
// two decisions ever share a draw. A roll's number is hashed into seeded
// draws: renumbering one changes what every seed replays, so numbers are
// never reused or changed.
type Roll uint8

// The rolls that are not a fault's own.
const (
	RollReplace Roll = 1
)

// Key identifies one draw.
type Key struct {
	Proxy     string
	Mock      string // empty when no mock is involved
	RequestID string
	// Attempt is how many times this instance has already seen the request
	// id on the proxy (0 for the first): a retry is a new attempt, with
	// rolls of its own. Counted only when rolls are seeded.
	Attempt uint32
	Roll    Roll
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

// Replace is the share of matching requests a mock answers. It is not a
// fault: it chooses what answers, before any fault is rolled.
type Replace float64

// Fires reports whether the mock answers this request.
func (p Replace) Fires(r Roller, k Key) bool {
	k.Roll = RollReplace
	return Fires(r, k, float64(p))
}
