package journal

import (
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Live subscribers (SPEC §18.4). Recording does the same small work
// however many there are: it stores the entry in one ring, the feed, and
// wakes one goroutine, which tells each subscriber there is something
// new. Each subscriber then reads the feed from its own place, in its own
// goroutine: filtering, encoding and writing are the subscriber's time,
// never the request's, and a subscriber that falls behind is skipped
// ahead rather than waited for.

const (
	// MaxBehind is how many entries a subscriber may leave unread: past
	// it, the oldest are dropped for that subscriber alone, and counted.
	MaxBehind = 1000
	// feedSize is how many of the newest entries the feed holds while
	// anyone subscribes: a power of two above MaxBehind, so an entry is
	// still there when a subscriber within bounds comes to read it.
	feedSize = 1024
	// fanOutEvery spaces the rounds of telling subscribers: entries
	// recorded within it reach a subscriber together, in one write,
	// rather than in one write (a system call) per entry per subscriber
	// under load. The first entry after a quiet moment goes at once.
	fanOutEvery = 25 * time.Millisecond
)

// An Event is an entry as subscribers read it from the feed: made into an
// Entry and encoded once, by the first subscriber that needs it, however
// many read it.
type Event struct {
	k         *kept
	entryOnce sync.Once
	entry     *Entry
	jsonOnce  sync.Once
	json      []byte
}

// Seq is the entry's place in the order of recording.
func (ev *Event) Seq() uint64 { return ev.k.seq }

// Entry is the entry, shared by every subscriber.
func (ev *Event) Entry() *Entry {
	ev.entryOnce.Do(func() { ev.entry = ev.k.entry() })
	return ev.entry
}

// JSON is the entry as the API writes it, shared by every subscriber.
func (ev *Event) JSON() []byte {
	ev.jsonOnce.Do(func() { ev.json, _ = json.Marshal(ev.Entry()) })
	return ev.json
}

// feed is the ring subscribers read, and the goroutine that tells them:
// there while anyone subscribes.
type feed struct {
	slots [feedSize]atomic.Pointer[Event]
	wake  chan struct{} // capacity 1: something was published since the last round
	stop  chan struct{} // closed when the last subscriber leaves
	subs  atomic.Pointer[[]*Subscriber]
}

// publish is recording's part: one store and one signal that never waits.
func (f *feed) publish(k *kept) {
	ev := &Event{k: k}
	slot := &f.slots[k.seq%feedSize]
	for {
		// A newer entry may hold the slot already when this one was
		// held up between its number and here: it stays.
		old := slot.Load()
		if old != nil && old.Seq() > k.seq || slot.CompareAndSwap(old, ev) {
			break
		}
	}
	select {
	case f.wake <- struct{}{}:
	default: // a round is due already
	}
}

// at is the event of that order while the feed holds it.
func (f *feed) at(seq uint64) *Event {
	if ev := f.slots[seq%feedSize].Load(); ev != nil && ev.Seq() == seq {
		return ev
	}
	return nil
}

// fanOut tells the subscribers, in rounds at most fanOutEvery apart, until
// the last leaves. A subscriber told already and not yet reading is not
// told twice.
func (f *feed) fanOut() {
	pause := time.NewTimer(fanOutEvery)
	pause.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		for _, s := range *f.subs.Load() {
			select {
			case s.ready <- struct{}{}:
			default:
			}
		}
		pause.Reset(fanOutEvery)
		select {
		case <-f.stop:
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// A Subscriber reads the entries recorded since it subscribed, those its
// wants says yes to. Recording never waits for it: past MaxBehind unread
// entries, the oldest are dropped for it, and Read says how many.
type Subscriber struct {
	j     *Journal
	f     *feed // nil: no journal, nothing ever comes
	ready chan struct{}
	next  uint64 // the order of the next entry to read
	start uint64 // the order of the newest entry recorded before it subscribed
	wants func(*Entry) bool
}

// Start is the order of the newest entry recorded before s subscribed:
// s reads those recorded after it (0: none before).
func (s *Subscriber) Start() uint64 { return s.start }

// Subscribe starts a subscriber to the new entries wants says yes to
// (every one when nil); Unsubscribe must follow. wants runs in the
// goroutine that calls Read.
func (j *Journal) Subscribe(wants func(*Entry) bool) *Subscriber {
	s := &Subscriber{j: j, ready: make(chan struct{}, 1), wants: wants}
	if j == nil {
		return s
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	f := j.feed.Load()
	if f == nil {
		f = &feed{wake: make(chan struct{}, 1), stop: make(chan struct{})}
		f.subs.Store(&[]*Subscriber{})
		go f.fanOut()
		// Published before the first number is read below: an entry
		// numbered after it is published into this feed.
		j.feed.Store(f)
	}
	s.f = f
	next := append(slices.Clone(*f.subs.Load()), s)
	f.subs.Store(&next)
	s.start = j.seq.Load()
	s.next = s.start + 1
	return s
}

// Unsubscribe stops s receiving; the last to leave stops the feed.
func (j *Journal) Unsubscribe(s *Subscriber) {
	if j == nil || s.f == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	f := s.f
	next := slices.DeleteFunc(slices.Clone(*f.subs.Load()), func(x *Subscriber) bool { return x == s })
	f.subs.Store(&next)
	if len(next) == 0 && j.feed.Load() == f {
		j.feed.Store(nil)
		close(f.stop)
	}
	s.f = nil
}

// Subscribers is how many are subscribed now.
func (j *Journal) Subscribers() int {
	if j == nil {
		return 0
	}
	if f := j.feed.Load(); f != nil {
		return len(*f.subs.Load())
	}
	return 0
}

// Ready receives when there may be new entries to Read.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Read appends to buf[:0], up to its capacity, the next entries s wants,
// oldest first, and returns them with how many entries s wanted that it
// lost since the last Read by leaving more than MaxBehind unread (an
// entry the feed no longer held counts, wanted or not). Fewer than
// cap(buf): there are no more for now, and Ready says when there may be.
// One goroutine reads a subscriber.
func (s *Subscriber) Read(buf []*Event) ([]*Event, uint64) {
	out := buf[:0]
	if s.f == nil {
		return out, 0
	}
	var dropped uint64
	newest := s.j.seq.Load()
	if newest >= s.next+MaxBehind {
		keepFrom := newest - MaxBehind + 1
		if newest >= s.next+feedSize {
			// Gone from the feed, wanted or not: counted at once.
			gone := newest - feedSize + 1
			dropped += gone - s.next
			s.next = gone
		}
		for ; s.next < keepFrom; s.next++ {
			if ev := s.f.at(s.next); ev == nil || s.wanted(ev) {
				dropped++
			}
		}
	}
	for len(out) < cap(out) && s.next <= newest {
		ev := s.f.slots[s.next%feedSize].Load()
		switch {
		case ev == nil || ev.Seq() < s.next:
			return out, dropped // numbered, not yet published: Ready follows
		case ev.Seq() > s.next:
			dropped++ // overtaken in the feed before it could be read
		case s.wanted(ev):
			out = append(out, ev)
		}
		s.next++
	}
	return out, dropped
}

func (s *Subscriber) wanted(ev *Event) bool { return s.wants == nil || s.wants(ev.Entry()) }
