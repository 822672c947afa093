package journal

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// readAll reads s until it has n entries or a Read ends short with none
// due, in batches of batch; it returns their ids and what was dropped.
func readAll(s *Subscriber, batch int) (got []string, dropped uint64) {
	buf := make([]*Event, 0, batch)
	for {
		evs, lost := s.Read(buf)
		dropped += lost
		for _, ev := range evs {
			got = append(got, ev.Entry().ID)
		}
		if len(evs) < batch {
			return got, dropped
		}
	}
}

// TestASubscriberBehindIsSkippedAhead: a subscriber that leaves more than
// MaxBehind entries unread loses the oldest, is told how many, and reads
// the newest MaxBehind in order; recording went on meanwhile.
func TestASubscriberBehindIsSkippedAhead(t *testing.T) {
	j := New(doc(t, ""))
	s := j.Subscribe(nil)
	defer j.Unsubscribe(s)
	for i := range 3000 {
		record(j, fmt.Sprint(i), "zeta", "/", time.Now(), nil)
	}
	got, dropped := readAll(s, 64)
	if dropped != 2000 || len(got) != MaxBehind || got[0] != "2000" || got[len(got)-1] != "2999" {
		t.Fatalf("dropped %d, read %d (%v … %v); want 2000 dropped, then 2000 to 2999", dropped, len(got), got[:1], got[len(got)-1:])
	}
	for i, id := range got {
		if id != fmt.Sprint(2000+i) {
			t.Fatalf("read %s in place %d", id, i)
		}
	}
	// Caught up: the next entry comes, none dropped.
	record(j, "next", "zeta", "/", time.Now(), nil)
	<-s.Ready()
	if got, dropped := readAll(s, 64); len(got) != 1 || got[0] != "next" || dropped != 0 {
		t.Errorf("after catching up: %v, %d dropped", got, dropped)
	}
}

// TestDroppedCountsWhatTheSubscriberWanted: of the entries skipped, those
// its filter refuses are not counted as lost.
func TestDroppedCountsWhatTheSubscriberWanted(t *testing.T) {
	j := New(doc(t, ""))
	s := j.Subscribe(func(e *Entry) bool { return e.Proxy == "zeta" })
	defer j.Unsubscribe(s)
	for i := range MaxBehind + 10 {
		proxy := "zeta"
		if i%2 == 1 {
			proxy = "alpha"
		}
		record(j, fmt.Sprint(i), proxy, "/", time.Now(), nil)
	}
	got, dropped := readAll(s, 1000)
	if dropped != 5 || len(got) != MaxBehind/2 || got[0] != "10" {
		t.Errorf("dropped %d, read %d from %v; want 5 dropped (zeta's among the 10 oldest), then zeta's 500 from 10", dropped, len(got), got[:1])
	}
}

// TestRecordingNeverRunsASubscriber: a subscriber's filter runs when it
// reads, never on the request: one that blocks holds up no recording.
func TestRecordingNeverRunsASubscriber(t *testing.T) {
	j := New(doc(t, ""))
	release := make(chan struct{})
	s := j.Subscribe(func(*Entry) bool { <-release; return true })
	defer j.Unsubscribe(s)
	reading := make(chan []string)
	go func() {
		<-s.Ready()
		got, _ := readAll(s, 64)
		reading <- got
	}()
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			record(j, fmt.Sprint(i), "zeta", "/", time.Now(), nil)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("recording waited for a subscriber's filter")
	}
	close(release)
	if got := <-reading; len(got) == 0 || got[0] != "0" {
		t.Errorf("the subscriber read %v", got)
	}
}

// TestSubscribersReadEveryEntryOnce: entries recorded from many
// goroutines reach every subscriber, each once, in the order of
// recording; a subscriber sees only what was recorded after it came.
func TestSubscribersReadEveryEntryOnce(t *testing.T) {
	j := New(doc(t, ""))
	record(j, "before", "zeta", "/", time.Now(), nil)
	const writers, each = 4, 200
	subs := []*Subscriber{j.Subscribe(nil), j.Subscribe(nil), j.Subscribe(nil)}
	var wg sync.WaitGroup
	results := make([][]uint64, len(subs))
	for i, s := range subs {
		wg.Go(func() {
			buf := make([]*Event, 0, 16)
			for len(results[i]) < writers*each {
				<-s.Ready()
				for {
					evs, lost := s.Read(buf)
					if lost != 0 {
						t.Errorf("subscriber %d lost %d", i, lost)
					}
					for _, ev := range evs {
						results[i] = append(results[i], ev.Seq())
					}
					if len(evs) < cap(buf) {
						break
					}
				}
			}
		})
	}
	var rec sync.WaitGroup
	for w := range writers {
		rec.Go(func() {
			for i := range each {
				record(j, fmt.Sprint(w, "-", i), "zeta", "/", time.Now(), nil)
			}
		})
	}
	rec.Wait()
	wg.Wait()
	for i, seqs := range results {
		for n, seq := range seqs {
			if seq != uint64(n+2) { // 1 was "before"
				t.Fatalf("subscriber %d read %d in place %d", i, seq, n)
			}
		}
	}
	for _, s := range subs {
		j.Unsubscribe(s)
	}
	if j.Subscribers() != 0 || j.feed.Load() != nil {
		t.Error("the last subscriber left and the feed is still there")
	}
}

// TestAnEntryHeldUpKeepsNoNewerOut: an entry published after a newer one
// took its place in the feed does not put the older back.
func TestAnEntryHeldUpKeepsNoNewerOut(t *testing.T) {
	f := &feed{wake: make(chan struct{}, 1)}
	f.publish(&kept{seq: 5 + feedSize})
	f.publish(&kept{seq: 5})
	if f.at(5+feedSize) == nil || f.at(5) != nil {
		t.Error("the held-up entry took the newer one's place")
	}
}

// TestNoJournalNoEntries: without a journal a subscriber reads nothing.
func TestNoJournalNoEntries(t *testing.T) {
	var j *Journal
	s := j.Subscribe(nil)
	if evs, lost := s.Read(make([]*Event, 0, 4)); len(evs) != 0 || lost != 0 {
		t.Error("a subscriber of no journal read something")
	}
	j.Unsubscribe(s)
}
