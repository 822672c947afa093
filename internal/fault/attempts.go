package fault

import (
	"context"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"github.com/doppelproxy/doppel/internal/shared"
)

// MaxAttemptIDs is how many request ids a proxy remembers for counting
// attempts: an id is forgotten once this many newer ids have been seen for
// the first time since it was.
const MaxAttemptIDs = shared.MaxAttemptIDs

// attemptShards spread the ids over locks of their own, so that no lock
// is shared by all the requests of a proxy.
const attemptShards = 64

// Attempts counts how often a proxy has seen each request id, so that a
// retry (the same X-Request-ID again) is a new attempt under a seed. Every
// new id takes the next number of one sequence; an id whose number is
// MaxAttemptIDs or more behind the latest is forgotten, so the window is
// exact and the same in every process that sees the same ids. Ids are kept
// as 64-bit hashes, so a long id costs no more than a short one. Each shard
// drops its forgotten ids as it takes new ones: at most about twice
// MaxAttemptIDs entries are held. The zero value is ready.
type Attempts struct {
	seq    atomic.Uint64 // numbers handed to new ids so far
	shards [attemptShards]attemptShard
	// shared, when set, are the fleet's counts (SPEC §18.1), asked first
	// as Counters asks theirs; report hears of each answer or failure.
	shared  Shared
	breaker *Breaker
}

// attemptScope is what the fleet's counters count attempts under: no
// mock, no fault, the request id as the key.
var attemptScope = Scope{}

// Shared reports whether a has been given the fleet's counts.
func (a *Attempts) Shared() bool { return a.shared != nil }

// Share makes a count in s first, the fleet's; called once, before a is
// in force.
func (a *Attempts) Share(s Shared, b *Breaker) { a.shared, a.breaker = s, b }

// NextIn is Next in the fleet's counts when a is shared and they answer
// within SharedTimeout (ctx, the request's, ends it sooner), else in a's
// own; it says which.
func (a *Attempts) NextIn(ctx context.Context, id string) (uint32, Where) {
	if a.shared == nil {
		return a.Next(id), Here
	}
	n, _, err := a.breaker.count(ctx, a.shared, attemptScope, id)
	if err == nil {
		return uint32(min(n-1, 1<<32-1)), Fleet
	}
	return a.Next(id), Local
}

type attemptShard struct {
	mu    sync.Mutex
	seen  map[uint64]attempt
	order []numbered // ids in the order they were numbered, oldest first
	_     [24]byte   // a shard to a cache line of its own
}

type attempt struct {
	n   uint32 // attempts counted
	num uint64 // the id's number in the sequence
}

type numbered struct {
	id  uint64
	num uint64
}

// NewAttempts makes an empty memory of attempts.
func NewAttempts() *Attempts { return &Attempts{} }

// Next returns how many times id was seen before (0 the first time, or
// once it is forgotten) and counts this time.
func (a *Attempts) Next(id string) uint32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	key := h.Sum64()
	s := &a.shards[key%attemptShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[key]; ok && a.seq.Load()-e.num < MaxAttemptIDs {
		s.seen[key] = attempt{n: e.n + 1, num: e.num}
		return e.n
	}
	// Numbered under the shard's lock, so a shard's order is its numbers'.
	num := a.seq.Add(1)
	drop := 0
	for drop < len(s.order) && num-s.order[drop].num >= MaxAttemptIDs {
		if e := s.seen[s.order[drop].id]; e.num == s.order[drop].num {
			delete(s.seen, s.order[drop].id)
		}
		drop++
	}
	s.order = append(s.order[drop:], numbered{id: key, num: num})
	if s.seen == nil {
		s.seen = make(map[uint64]attempt)
	}
	s.seen[key] = attempt{n: 1, num: num}
	return 0
}

// Reset forgets every id: each starts again at its first attempt.
func (a *Attempts) Reset() {
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.Lock()
		s.seen, s.order = nil, nil
		s.mu.Unlock()
	}
}
