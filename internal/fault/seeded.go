package fault

import (
	"hash/fnv"
)

// Seeded makes every roll a pure function of the seed, the proxy, the
// mock, the request id, the attempt and which roll it is: a client that
// replays the same request ids gets the same faults, whatever the
// concurrency and the timing, so a failing run can be reproduced exactly,
// and a retry that resends its id gets a roll of its own. It takes no
// lock and shares no state between requests.
type Seeded struct {
	seed string
}

// NewSeeded makes the rolls of seed.
func NewSeeded(seed string) Seeded { return Seeded{seed: seed} }

func (s Seeded) Float64(k Key) float64 {
	h := fnv.New64a()
	for _, part := range [...]string{s.seed, k.Proxy, k.Mock, k.RequestID} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	// The first attempt hashes as it did before attempts were counted, so
	// a seed replays the same first answers across versions.
	if k.Attempt > 0 {
		a := k.Attempt
		_, _ = h.Write([]byte{0xff, byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
	}
	_, _ = h.Write([]byte{byte(k.Roll)})
	// FNV alone mixes the last bytes poorly; a splitmix64 finaliser spreads
	// every input bit over the output before it becomes a fraction.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
