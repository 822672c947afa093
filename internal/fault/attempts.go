package fault

import (
	"hash/maphash"
	"sync"
)

// MaxAttemptIDs is how many request ids a proxy remembers for counting
// attempts; the oldest is forgotten first.
const MaxAttemptIDs = 100_000

// attemptShards spread the ids over locks of their own, so that no lock
// is shared by all the requests of a proxy.
const attemptShards = 64

const perShard = (MaxAttemptIDs + attemptShards - 1) / attemptShards

// Attempts counts how often a proxy has seen each request id, so that a
// retry (the same X-Request-ID again) is a new attempt under a seed. Ids
// are kept as 64-bit hashes, so a long id costs no more than a short one;
// each shard forgets its oldest id when full. The zero value is not
// ready: use NewAttempts.
type Attempts struct {
	seed   maphash.Seed
	shards [attemptShards]attemptShard
}

type attemptShard struct {
	mu    sync.Mutex
	seen  map[uint64]uint32
	order []uint64 // a ring of the ids in seen, oldest at next once full
	next  int
}

// NewAttempts makes an empty memory of attempts.
func NewAttempts() *Attempts { return &Attempts{seed: maphash.MakeSeed()} }

// Next returns how many times id was seen before (0 the first time) and
// counts this time.
func (a *Attempts) Next(id string) uint32 {
	h := maphash.String(a.seed, id)
	s := &a.shards[h%attemptShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.seen[h]; ok {
		s.seen[h] = n + 1
		return n
	}
	if s.seen == nil {
		s.seen = make(map[uint64]uint32)
	}
	if len(s.order) < perShard {
		s.order = append(s.order, h)
	} else {
		delete(s.seen, s.order[s.next])
		s.order[s.next] = h
		s.next = (s.next + 1) % perShard
	}
	s.seen[h] = 1
	return 0
}
