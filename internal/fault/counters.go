package fault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/shared"
)

// MaxCounterKeys is how many counters a proxy keeps for its faults'
// conditions (SPEC §17.3): past it, the oldest key is forgotten first.
const MaxCounterKeys = 100_000

// maxKeyText bounds what a counter keeps of its key (a header value) to
// show; the count is still per whole value.
const maxKeyText = 256

const counterShards = 64

// Counters are a proxy's counts for its faults' conditions, per (mock,
// fault, key). They outlive a reload that leaves the proxy unchanged
// (Adopt) and are emptied by Reset. Counting takes a shard's lock, never
// one shared by all requests; every new key takes the next number of one
// sequence, and a key MaxCounterKeys or more behind the latest is
// forgotten, so the bound is exact.
type Counters struct {
	// state is shared with the Counters this one adopted (and they with
	// it): a reset through either, even while a reload is under way, is a
	// reset of both.
	state *atomic.Pointer[counterState]
	// max is how many keys are kept: MaxCounterKeys unless Bound says.
	max uint64
	// forgot says a key has been forgotten to make room since the last
	// Forgot call said so; warned makes that once per state.
	forgot atomic.Bool
	// shared, when set, are the fleet's counts of the same counters,
	// which Count asks first; report hears of each answer (nil) or
	// failure (Count then counted here).
	shared  Shared
	breaker *Breaker
}

// Breaker is what a replica knows of its fleet's counters: whether they
// answer. While they do not, a count asks them once a second at most, the
// others counting here at once, so that an outage holds one request a
// second rather than every request (SPEC §18.1); report hears of each
// change.
type Breaker struct {
	down    atomic.Bool
	probeAt atomic.Int64 // Unix nanoseconds: when the next count may ask
	report  func(down bool, err error)
	timeout time.Duration
}

// NewBreaker is a breaker counts wait timeout for (SharedTimeout when 0);
// report hears when the counters stop and start answering.
func NewBreaker(timeout time.Duration, report func(down bool, err error)) *Breaker {
	return &Breaker{report: report, timeout: cmp.Or(timeout, SharedTimeout)}
}

// probeEvery is how often a count asks counters that did not answer.
const probeEvery = time.Second

// ask reports whether a count may ask the fleet's counters now.
func (b *Breaker) ask(now time.Time) bool {
	if !b.down.Load() {
		return true
	}
	at := b.probeAt.Load()
	return now.UnixNano() >= at && b.probeAt.CompareAndSwap(at, now.Add(probeEvery).UnixNano())
}

// answered records how the counters answered a count.
func (b *Breaker) answered(now time.Time, err error) {
	switch {
	case err == nil && b.down.Load() && b.down.CompareAndSwap(true, false):
		b.report(false, nil)
	case err != nil && !b.down.Load() && b.down.CompareAndSwap(false, true):
		b.probeAt.Store(now.Add(probeEvery).UnixNano())
		b.report(true, err)
	}
}

// errSkipped is a count the breaker kept from asking.
var errSkipped = errors.New("the fleet's counters did not answer a moment ago")

// count asks s for a count within the breaker's timeout, or not at all
// while it is down.
func (b *Breaker) count(ctx context.Context, s Shared, scope Scope, key string) (uint64, time.Time, error) {
	now := time.Now()
	if !b.ask(now) {
		return 0, time.Time{}, errSkipped
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	n, first, err := s.Count(ctx, scope, key)
	cancel()
	if ctx.Err() == nil || err == nil {
		b.answered(now, err)
	} else {
		b.answered(now, fmt.Errorf("no answer within %v", b.timeout))
	}
	return n, first, err
}

// SharedTimeout is how long a count waits for the fleet's counters before
// it counts on this replica instead (SPEC §18.1): a request is never held
// longer for them.
const SharedTimeout = 250 * time.Millisecond

// Shared are counters every replica of a fleet counts in (SPEC §18.1).
// The contract sits in package shared so that a store implements it
// without importing this package.
type Shared = shared.Counters

// Where says which counters a count was kept in.
type Where uint8

const (
	// Here: the only counters there are, this process's (no fleet).
	Here Where = iota
	// Fleet: the fleet's, in the database.
	Fleet
	// Local: this replica's, as the fleet's did not answer in time.
	Local
)

// String is what the journal says: "" for Here, "fleet", "local".
func (w Where) String() string {
	switch w {
	case Fleet:
		return "fleet"
	case Local:
		return "local"
	}
	return ""
}

// Share makes c count in s first (the fleet's counters), as b allows.
// Called before c is put in force.
func (c *Counters) Share(s Shared, b *Breaker) { c.shared, c.breaker = s, b }

type counterState struct {
	seed   maphash.Seed
	seq    atomic.Uint64
	warned atomic.Bool
	shards [counterShards]counterShard
}

type counterShard struct {
	mu    sync.Mutex
	seen  map[uint64]*counter // by the hash of scope and key
	order []numberedKey
	_     [24]byte
}

// Scope is the mock and fault a condition counts for.
type Scope = shared.Scope

type counter struct {
	n     uint64
	first time.Time
	scope Scope
	key   string
	num   uint64
}

type numberedKey struct {
	k   uint64
	num uint64
}

// NewCounters makes empty counters.
func NewCounters() *Counters {
	c := &Counters{max: MaxCounterKeys}
	c.state = &atomic.Pointer[counterState]{}
	c.state.Store(newCounterState())
	return c
}

func newCounterState() *counterState { return &counterState{seed: maphash.MakeSeed()} }

// Max is how many keys c keeps.
func (c *Counters) Max() uint64 { return c.max }

// Bound makes c keep at most n keys; called before c counts anything.
func (c *Counters) Bound(n uint64) { c.max = n }

// Adopt makes c count into old's counts from now on, as the proxy of a
// runtime that replaces old's unchanged.
// It is called before c counts anything and is put in force.
func (c *Counters) Adopt(old *Counters) { c.state = old.state }

// Reset forgets every count: the fleet's too when shared.
func (c *Counters) Reset(ctx context.Context) error {
	c.state.Store(newCounterState())
	if c.shared != nil {
		return c.shared.Reset(ctx)
	}
	return nil
}

// Forgot reports, once, that a key was forgotten to make room.
func (c *Counters) Forgot() bool { return c.forgot.Load() && c.forgot.CompareAndSwap(true, false) }

// Count counts one more request for key under scope, at now, and
// returns how many there are (1 for the first), when the first came, and
// where it was counted: in the fleet's counters when shared and they
// answer within SharedTimeout (ctx, the request's, ends it sooner), else
// in c's own.
func (c *Counters) Count(ctx context.Context, scope *Scope, key string, now time.Time) (n uint64, first time.Time, where Where) {
	if c.shared == nil {
		n, first = c.count(scope, key, now)
		return n, first, Here
	}
	n, first, err := c.breaker.count(ctx, c.shared, *scope, key)
	if err == nil {
		return n, first, Fleet
	}
	n, first = c.count(scope, key, now)
	return n, first, Local
}

// count is Count in c's own counters.
func (c *Counters) count(scope *Scope, key string, now time.Time) (n uint64, first time.Time) {
	st := c.state.Load()
	var h maphash.Hash
	h.SetSeed(st.seed)
	_, _ = h.WriteString(scope.Mock)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(scope.Fault)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key)
	k := h.Sum64()
	s := &st.shards[k%counterShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[k]; ok && st.seq.Load()-e.num < c.max {
		e.n++
		return e.n, e.first
	}
	num := st.seq.Add(1)
	drop := 0
	for drop < len(s.order) && num-s.order[drop].num >= c.max {
		if e := s.seen[s.order[drop].k]; e != nil && e.num == s.order[drop].num {
			delete(s.seen, s.order[drop].k)
		}
		drop++
	}
	if num > c.max && !st.warned.Load() && st.warned.CompareAndSwap(false, true) {
		c.forgot.Store(true)
	}
	s.order = append(s.order[drop:], numberedKey{k: k, num: num})
	if s.seen == nil {
		s.seen = make(map[uint64]*counter)
	}
	if len(key) > maxKeyText {
		key = key[:maxKeyText]
	}
	s.seen[k] = &counter{n: 1, first: now, scope: *scope, key: key, num: num}
	return 1, now
}

// A Count is one counter as listed.
type Count = shared.Count

// List is every counter kept, oldest first: the fleet's when shared.
func (c *Counters) List(ctx context.Context) ([]Count, error) {
	if c.shared != nil {
		return c.shared.List(ctx, c.max)
	}
	return c.list(), nil
}

func (c *Counters) list() []Count {
	st := c.state.Load()
	latest := st.seq.Load()
	out := []Count{}
	for i := range st.shards {
		s := &st.shards[i]
		s.mu.Lock()
		for _, e := range s.seen {
			if latest-e.num >= c.max {
				continue
			}
			out = append(out, Count{Mock: e.scope.Mock, Fault: e.scope.Fault, Key: e.key, N: e.n, FirstSeen: e.first})
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(a.FirstSeen.Compare(b.FirstSeen), cmp.Compare(a.Mock, b.Mock), cmp.Compare(a.Fault, b.Fault), cmp.Compare(a.Key, b.Key))
	})
	return out
}
