package journal

import (
	"slices"
	"sync/atomic"
)

// subscriberBuffer bounds what a subscriber may fall behind by: past it,
// entries are dropped for that subscriber alone, and counted.
const subscriberBuffer = 256

// A Subscriber receives new entries as they are recorded. Recording never
// waits for it: when its buffer is full the entry is dropped, and Dropped
// says how many were since it last asked.
type Subscriber struct {
	C       <-chan *Entry
	c       chan *Entry
	wants   func(*Entry) bool // nil: every entry
	dropped atomic.Uint64
}

// offer gives s an entry it wants: what it does not want neither fills
// its buffer nor counts as dropped.
func (s *Subscriber) offer(e *Entry) {
	if s.wants != nil && !s.wants(e) {
		return
	}
	select {
	case s.c <- e:
	default:
		s.dropped.Add(1)
	}
}

// Dropped returns and resets how many entries were lost to a full buffer.
func (s *Subscriber) Dropped() uint64 { return s.dropped.Swap(0) }

// Subscribe starts receiving the new entries wants says yes to (every one
// when nil); Unsubscribe must follow. wants runs as entries are recorded:
// it must be cheap and safe from any goroutine.
func (j *Journal) Subscribe(wants func(*Entry) bool) *Subscriber {
	c := make(chan *Entry, subscriberBuffer)
	s := &Subscriber{C: c, c: c, wants: wants}
	if j == nil {
		return s // no journal: nothing ever comes
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var next []*Subscriber
	if cur := j.subs.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, s)
	j.subs.Store(&next)
	return s
}

// Unsubscribe stops s receiving.
func (j *Journal) Unsubscribe(s *Subscriber) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	cur := j.subs.Load()
	if cur == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*cur), func(x *Subscriber) bool { return x == s })
	j.subs.Store(&next)
}

// Subscribers is how many are subscribed now.
func (j *Journal) Subscribers() int {
	if j == nil {
		return 0
	}
	if cur := j.subs.Load(); cur != nil {
		return len(*cur)
	}
	return 0
}
