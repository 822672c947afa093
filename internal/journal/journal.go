// Package journal is the request journal (SPEC §17.4): a bounded ring of
// the newest requests the proxy listener handled, the filters the admin
// API reads it through, verification of what a client did, and live
// subscribers.
//
// Recording takes no lock shared by all requests: a request claims a slot
// by an atomic counter and stores a pointer to its immutable record there
// (kept.go: one byte slice and numbers, for the garbage collector).
// Readers load the slots and order them by that counter. Subscribers read
// a ring of their own (subscribe.go), which recording fills the same way.
package journal

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// Journal is one instance's journal. It outlives reloads: Configure
// resizes it when journal.size changes. The zero value is not usable;
// a nil *Journal is off.
type Journal struct {
	ring    atomic.Pointer[ring] // nil while off
	seq     atomic.Uint64        // entries ever recorded
	dropped atomic.Uint64        // entries the ring forgot to make room
	feed    atomic.Pointer[feed] // nil while no one subscribes

	mu sync.Mutex // Configure, Clear and subscribing; never recording
}

// ring is the fixed slots of one size, with what recording needs.
type ring struct {
	*ringSlots // shared by the rings of one size, a reload over
	settings
	rec Recorder // what Active hands out, made once
}

// ringSlots are the entries of a ring and what they take. An entry is
// placed at next (its pos), modulo the slots; the byte budget evicts
// from tail, the oldest place it has not passed.
type ringSlots struct {
	at   []atomic.Pointer[kept]
	next atomic.Uint64 // the place the next entry takes
	tail atomic.Uint64 // places before it the budget has evicted or passed
	used atomic.Int64  // the sizes of the entries in at
}

// settings are what recording reads of the configuration.
type settings struct {
	bodies         int
	headers        int      // journal.headers
	budget         int64    // journal.bytes
	secret         []string // canonical request header names kept as Masked
	responseSecret []string // and the answer's
}

// New makes a journal configured by doc's journal section.
func New(doc *config.Document) *Journal {
	j := &Journal{}
	j.Configure(doc)
	return j
}

// Configure applies a (reloaded) document: a new size or budget keeps the
// newest entries that fit both, the others counted as dropped; size 0
// turns recording off and forgets everything.
func (j *Journal) Configure(doc *config.Document) {
	j.mu.Lock()
	defer j.mu.Unlock()
	jc := doc.Journal
	if jc == nil {
		jc = &config.Journal{}
	}
	size, bodies := int(config.DefaultJournalSize), int(config.DefaultJournalBodies)
	if jc.Size != nil {
		size = int(*jc.Size)
	}
	if jc.Bodies != nil {
		bodies = int(*jc.Bodies)
	}
	old := j.ring.Load()
	if size == 0 {
		j.ring.Store(nil)
		return
	}
	r := &ring{}
	r.rec = Recorder{j: j, r: r}
	r.bodies = bodies
	r.headers = jc.HeadersKept()
	r.budget = jc.Budget()
	r.secret = secretsOf(jc.Reveals, append([]string{string(doc.Admin.Auth.Header)}, secretHeaders[:]...)...)
	r.responseSecret = secretsOf(jc.Reveals, secretResponseHeaders[:]...)
	if old != nil && len(old.at) == size {
		// The same slots under new settings, and their place: the next
		// entry goes after the newest, not over the oldest. A request
		// recording into the old ring meanwhile is not lost.
		r.ringSlots = old.ringSlots
		if n := r.next.Load(); n > 0 {
			j.dropped.Add(r.fit(r.budget, n-1))
		}
		j.ring.Store(r)
		return
	}
	r.ringSlots = &ringSlots{at: make([]atomic.Pointer[kept], size)}
	if old != nil {
		ks := old.kept()
		if len(ks) > size {
			j.dropped.Add(uint64(len(ks) - size))
			ks = ks[len(ks)-size:]
		}
		var used int64
		first := len(ks)
		for first > 0 && (first == len(ks) || used+ks[first-1].size <= r.budget) {
			first--
			used += ks[first].size
		}
		j.dropped.Add(uint64(first))
		ks = ks[first:]
		// Placed by their order, not their numbers: a clear leaves gaps
		// in the numbers, and two of the newest could share a slot. The
		// copies carry their new places; the text is shared.
		for i, k := range ks {
			c := *k
			c.pos = uint64(i)
			r.at[i].Store(&c)
		}
		r.next.Store(uint64(len(ks)))
		r.used.Store(used)
	}
	j.ring.Store(r)
}

// A Recorder is the journal while it is on: what the proxy handler holds
// for one request.
type Recorder struct {
	j *Journal
	r *ring
}

// Active returns the recorder for a request arriving now, or nil when the
// journal is off (or j is nil): the handler's one check.
func (j *Journal) Active() *Recorder {
	if j == nil {
		return nil
	}
	r := j.ring.Load()
	if r == nil {
		return nil
	}
	return &r.rec
}

// Bodies is how many bytes of each body to capture.
func (rc *Recorder) Bodies() int { return rc.r.bodies }

// Record keeps a finished request. start is when it arrived. The entry
// goes into the ring in force now, which a reload may have resized since
// the request arrived; its settings are those the request started with.
func (rc *Recorder) Record(rec *telemetry.Exchange, start time.Time) {
	rc.j.add(keep(rec, start, &rc.r.settings))
}

func (j *Journal) add(k *kept) {
	r := j.ring.Load()
	if r == nil {
		return // turned off meanwhile
	}
	k.seq = j.seq.Add(1)
	k.pos = r.next.Add(1) - 1
	r.used.Add(k.size)
	if old := r.at[k.pos%uint64(len(r.at))].Swap(k); old != nil {
		r.used.Add(-old.size)
		j.dropped.Add(1)
	}
	if r.used.Load() > r.budget {
		j.dropped.Add(r.fit(r.budget, k.pos))
	}
	if f := j.feed.Load(); f != nil {
		f.publish(k)
	}
}

// fit evicts the oldest entries until those kept take at most budget
// bytes, and returns how many it evicted. It never evicts the entry at
// place newest nor a newer one: the newest entry is kept even alone over
// the budget. Recorders that evict at once each claim a place from tail;
// an entry still being placed at a place passed is not evicted, and is
// counted until the next that fits.
func (s *ringSlots) fit(budget int64, newest uint64) (evicted uint64) {
	n := uint64(len(s.at))
	for s.used.Load() > budget {
		t := s.tail.Load()
		if newest >= n && t <= newest-n {
			// Places up to newest-n are taken over by newer entries.
			s.tail.CompareAndSwap(t, newest-n+1)
			continue
		}
		if t >= newest {
			return evicted
		}
		if !s.tail.CompareAndSwap(t, t+1) {
			continue
		}
		slot := &s.at[t%n]
		if k := slot.Load(); k != nil && k.pos == t && slot.CompareAndSwap(k, nil) {
			s.used.Add(-k.size)
			evicted++
		}
	}
	return evicted
}

// kept are the ring's records, oldest first.
func (r *ring) kept() []*kept {
	out := make([]*kept, 0, len(r.at))
	for i := range r.at {
		if k := r.at[i].Load(); k != nil {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b *kept) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Entries are the entries kept, oldest first; none when off.
func (j *Journal) Entries() []*Entry {
	ks := j.kept()
	out := make([]*Entry, len(ks))
	for i, k := range ks {
		out[i] = k.entry()
	}
	return out
}

// Dropped is how many entries the ring forgot to make room for newer ones
// since start.
func (j *Journal) Dropped() uint64 {
	if j == nil {
		return 0
	}
	return j.dropped.Load()
}

// Size is how many entries the ring keeps; 0 when off.
func (j *Journal) Size() int {
	if j == nil {
		return 0
	}
	if r := j.ring.Load(); r != nil {
		return len(r.at)
	}
	return 0
}

// Clear forgets the entries whose proxy clear says yes to, and returns
// how many. A cleared entry is not counted as dropped.
func (j *Journal) Clear(clear func(proxy string) bool) int {
	if j == nil {
		return 0
	}
	// Not while Configure copies the entries into a new ring: they would
	// come back.
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.ring.Load()
	if r == nil {
		return 0
	}
	n := 0
	for i := range r.at {
		if k := r.at[i].Load(); k != nil && clear(k.proxy()) && r.at[i].CompareAndSwap(k, nil) {
			r.used.Add(-k.size)
			n++
		}
	}
	return n
}
