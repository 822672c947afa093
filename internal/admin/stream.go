package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/journal"
)

// The journal's stream (SPEC §17.4, §18.4): each open stream is a
// subscriber of the journal, bounded per caller and in all.

const (
	// streamKeepAlive is how often an idle stream sends a comment, so
	// that proxies between do not close it and a client that left is
	// noticed.
	streamKeepAlive = 15 * time.Second
	// maxStreamsPerCaller and maxStreams bound the streams open at once.
	maxStreamsPerCaller = 16
	maxStreams          = 256
	// streamBatch is how many events a stream takes from the journal at
	// a time, and streamKeep how many bytes of them it encodes in one
	// turn (a batch more at most) and then writes at once: what it holds
	// beyond the journal's own while its client is slow to read.
	streamBatch = 16
	streamKeep  = 16 << 10
)

// streams counts the open streams, by caller, and hands out the turns
// they take to read and encode what is new.
type streams struct {
	mu  sync.Mutex
	of  map[string]int
	all int
	// turns bound how many streams take their entries at once, to half
	// the CPUs (at least one): however many streams there are, and
	// however fast requests come, the proxy keeps the other half, and a
	// stream that waits for its turn falls behind and is skipped ahead
	// instead (SPEC §18.4).
	turns chan struct{}
}

func newStreams() *streams {
	return &streams{of: map[string]int{}, turns: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
}

// open counts one more stream of caller, or says why not; caller "" is a
// fleet's stream asked by a peer, counted in all only (the replica asked
// counted its caller's).
func (st *streams) open(caller string) (closeFn func(), refusal string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case caller != "" && st.of[caller] >= maxStreamsPerCaller:
		return nil, fmt.Sprintf("%s has %d streams of the journal open, the most one caller may; close one first", caller, maxStreamsPerCaller)
	case st.all >= maxStreams:
		return nil, fmt.Sprintf("%d streams of the journal are open, the most Doppel serves at once; close one first", maxStreams)
	}
	st.of[caller]++
	st.all++
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.all--
		if st.of[caller]--; st.of[caller] == 0 {
			delete(st.of, caller)
		}
	}, ""
}

// streamCaller is whom a stream counts against: the token's name, or the
// client's address when reads are public and no token was sent.
func streamCaller(c Caller, r *http.Request) string {
	if !c.Anonymous {
		return "token " + string(c.Name)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "client " + host
}

func (s *Server) streamRequests(w http.ResponseWriter, r *http.Request) {
	q, local, visible, f, ok := s.journalQuery(w, r)
	if !ok {
		return
	}
	_, c := s.policy(r)
	caller := streamCaller(c, r)
	if _, fromPeer := r.Context().Value(fleetCaller{}).(fleet.Identity); fromPeer {
		caller = ""
	}
	done, refusal := s.streams.open(caller)
	if refusal != "" {
		apierr.Write(w, apierr.TooManySubscribers, refusal)
		return
	}
	defer done()
	if s.fleetWide(r, local) {
		s.streamFleet(w, r, q, f, visible)
		return
	}
	_, fromPeer := r.Context().Value(fleetCaller{}).(fleet.Identity)
	// Subscribed before the kept entries are read: an entry recorded
	// meanwhile is in one or the other, and seq tells which were sent.
	sub := s.journal.Subscribe(func(e *journal.Entry) bool { return visible(e.Proxy) && f.Matches(e) })
	defer s.journal.Unsubscribe(sub)
	var replay []*journal.Entry
	resumed := true
	if id := r.Header.Get("Last-Event-ID"); id != "" || f.Replays() {
		kept := s.journal.Entries()
		if seq, err := strconv.ParseUint(id, 10, 64); fromPeer && err == nil {
			// A fleet's stream resumes a peer at its position.
			resumed = f.ResumeAt(seq, sub.Start(), kept)
		} else {
			resumed = f.Resume(id, kept, visible)
		}
		if f.Replays() {
			var err error
			if replay, err = f.Select(kept, visible); err != nil {
				filterFailed(w, err)
				return
			}
		}
	}
	rc := beginEvents(w)
	if !resumed {
		_, _ = io.WriteString(w, ": the last event's entry is no longer kept; new entries follow\n\n")
	} else {
		_, _ = io.WriteString(w, ": the journal's entries follow\n\n")
	}
	// What was replayed, by its order: only those are skipped when they
	// come live (an entry recorded meanwhile may be older than the newest
	// replayed, and not among them).
	st := &stream{w: w, flush: rc.Flush, sub: sub, turns: s.streams.turns, sent: make(map[uint64]struct{}, len(replay))}
	for _, e := range replay {
		b, _ := json.Marshal(e)
		st.out = appendEvent(st.out[:0], e.Seq(), b)
		if _, err := w.Write(st.out); err != nil {
			return
		}
		st.sent[e.Seq()] = struct{}{}
	}
	if fromPeer {
		// What the follower begins from once the replay is sent.
		st.out = fmt.Appendf(st.out[:0], "event: position\ndata: {\"seq\":%d,\"resumed\":%t}\n\n", sub.Start(), resumed)
		if _, err := w.Write(st.out); err != nil {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	st.follow(r.Context())
}

// beginEvents answers 200 with an event stream, nothing between it and
// the client holding it back, and returns what flushes it.
func beginEvents(w http.ResponseWriter) *http.ResponseController {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}

// stream is one open stream's delivery.
type stream struct {
	w     io.Writer
	flush func() error
	sub   *journal.Subscriber
	turns chan struct{}       // shared by every stream (streams.turns)
	sent  map[uint64]struct{} // replayed already, not to be written again
	buf   []*journal.Event
	out   []byte
	fleet *fleetStream // a fleet's stream: ids are its cursor, entries say their replica
}

// follow writes what the subscriber reads, flushing after each round,
// and a comment when idle, until ctx ends or a write fails; a fleet's
// stream relays its peers' events too, and reads the registry every
// heartbeat.
func (st *stream) follow(ctx context.Context) {
	tick := time.NewTicker(streamKeepAlive)
	defer tick.Stop()
	var peers <-chan peerEvent    // none but a fleet's
	var registry <-chan time.Time // idem
	if st.fleet != nil {
		peers = st.fleet.events
		t := time.NewTicker(fleet.HeartbeatEvery)
		defer t.Stop()
		registry = t.C
	}
	st.buf = make([]*journal.Event, 0, streamBatch)
	var err error
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_, err = io.WriteString(st.w, ": keep-alive\n\n")
		case <-st.sub.Ready():
			err = st.round()
		case ev := <-peers:
			err = st.fleet.relay(ev)
		case now := <-registry:
			err = st.fleet.tick(ctx, now)
		}
		if err != nil || st.flush() != nil {
			return
		}
	}
}

// round writes what the subscriber has now: first, when it fell behind,
// the event `dropped` with how many entries it lost. The entries are
// taken and encoded during a turn, up to streamKeep bytes of them, and
// written to the client after it, so that a client slow to read holds up
// no other stream.
func (st *stream) round() error {
	for more := true; more; {
		st.out = st.out[:0]
		st.turns <- struct{}{}
		for more && len(st.out) < streamKeep {
			evs, dropped := st.sub.Read(st.buf)
			if dropped > 0 {
				if st.fleet != nil {
					st.out = appendDropped(st.out, st.fleet.self, dropped)
				} else {
					st.out = fmt.Appendf(st.out, "event: dropped\ndata: {\"dropped\":%d}\n\n", dropped)
				}
			}
			for _, ev := range evs {
				if _, ok := st.sent[ev.Seq()]; ok {
					delete(st.sent, ev.Seq())
					continue // replayed already
				}
				if st.fleet != nil {
					st.fleet.cur.set(st.fleet.self, ev.Seq())
					st.out = st.fleet.appendEntry(st.out, st.fleet.self, withReplica(ev.JSON(), st.fleet.self))
					continue
				}
				st.out = appendEvent(st.out, ev.Seq(), ev.JSON())
			}
			more = len(evs) == cap(st.buf)
			clear(evs) // the feed's to keep, not this stream's
		}
		<-st.turns
		if _, err := st.w.Write(st.out); err != nil {
			return err
		}
	}
	if cap(st.out) > 2*streamKeep {
		st.out = nil
	}
	return nil
}

// appendEvent appends an entry as the event `request`, its id the
// entry's place in the order of recording (what an EventSource sends back
// as Last-Event-ID when it reconnects; request ids repeat with retries).
func appendEvent(b []byte, seq uint64, entry []byte) []byte {
	b = strconv.AppendUint(append(b, "event: request\nid: "...), seq, 10)
	b = append(append(b, "\ndata: "...), entry...)
	return append(b, "\n\n"...)
}
