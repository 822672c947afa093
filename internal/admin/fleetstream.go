package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/journal"
)

// A fleet's stream (SPEC §18.1): the replica asked follows its own
// journal and the stream of each live peer, asked in a signed call as the
// other fleet reads are, and relays each entry as it arrives. What a
// client may resume from is a cursor, every followed replica's position:
// the id of each event is "<replica>:<n>" of its own entry first, then the
// others' positions and "@<ms>", the time it was written, so that an
// EventSource reconnecting to any replica (Last-Event-ID) loses nothing of
// those it followed and gets, of a replica it did not, the entries since.

const (
	// maxFollowed bounds the peers one stream follows.
	maxFollowed = 64
	// maxFrame bounds one frame of a peer's stream, maxPeerEvent one
	// event (an entry with both its bodies and headers at their largest
	// kept, as JSON).
	maxFrame     = 1 << 20
	maxPeerEvent = 8 << 20
	// peerEventsQueued is how many events of the peers wait for the
	// client at most; a follower waits past it, and its peer drops for it.
	peerEventsQueued = 64
	// peerSilence is how long a followed peer may send nothing, its
	// keep-alives included, before it is missing.
	peerSilence = 3 * streamKeepAlive
	// maxCursorParts bounds what a Last-Event-ID names.
	maxCursorParts = 1024
	// framesType is the media type of a peer's framed stream.
	framesType = "application/x-doppel-fleet-frames"
)

// framedAnswer sends a peer's stream to a fleet call as frames, each
// "<length> <signature>\n" and its bytes, so that the replica following
// it takes nothing the fleet key did not sign, frame by frame, in order.
type framedAnswer struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	key    fleet.Key
	nonce  string
	status int
	index  uint64
}

func newFramedAnswer(w http.ResponseWriter, r *http.Request, key fleet.Key) *framedAnswer {
	return &framedAnswer{w: w, rc: http.NewResponseController(w), key: key, nonce: r.Header.Get(fleet.HeaderNonce)}
}

func (a *framedAnswer) Header() http.Header { return a.w.Header() }

func (a *framedAnswer) WriteHeader(status int) {
	if a.status != 0 {
		return
	}
	a.status = status
	a.w.Header().Set("Content-Type", framesType)
	a.w.Header().Del("Content-Length")
	a.w.WriteHeader(status)
}

func (a *framedAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	n := 0
	for len(b) > 0 {
		part := b[:min(len(b), maxFrame)]
		head := fmt.Appendf(nil, "%d %s\n", len(part), a.key.SignFrame(a.nonce, a.status, a.index, part))
		a.index++
		if _, err := a.w.Write(head); err != nil {
			return n, err
		}
		if _, err := a.w.Write(part); err != nil {
			return n, err
		}
		n += len(part)
		b = b[len(part):]
	}
	return n, nil
}

// FlushError is what http.ResponseController's Flush calls.
func (a *framedAnswer) FlushError() error { return a.rc.Flush() }

// peerStream reads a peer's framed stream: each frame checked against the
// fleet key, the events of the bytes they carry split out.
type peerStream struct {
	br      *bufio.Reader
	key     fleet.Key
	req     *http.Request
	status  int
	index   uint64
	pending []byte
	onFrame func() // each frame checked, when set
}

func newPeerStream(body io.Reader, key fleet.Key, req *http.Request, status int) *peerStream {
	return &peerStream{br: bufio.NewReaderSize(body, 4096), key: key, req: req, status: status}
}

// errNotFrames is a peer's answer that is not a stream of frames.
var errNotFrames = errors.New("its stream is not one of signed frames")

// frame is the next frame's bytes, checked.
func (p *peerStream) frame() ([]byte, error) {
	line, err := p.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errNotFrames
		}
		return nil, err
	}
	n, sig, ok := strings.Cut(string(line[:len(line)-1]), " ")
	size, err := strconv.Atoi(n)
	if !ok || err != nil || size < 0 || size > maxFrame || len(sig) != 64 {
		return nil, errNotFrames
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(p.br, b); err != nil {
		return nil, fmt.Errorf("its stream broke off in a frame: %w", err)
	}
	if err := p.key.CheckFrame(p.req, p.status, p.index, b, sig); err != nil {
		return nil, err
	}
	p.index++
	if p.onFrame != nil {
		p.onFrame()
	}
	return b, nil
}

// body is the whole of a short answer (an error's), at most limit bytes.
func (p *peerStream) body(limit int) ([]byte, error) {
	var out []byte
	for len(out) <= limit {
		b, err := p.frame()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return nil, errors.New("its error answer is over its bound")
}

// refusal is a peer's answer that is not its stream, as an error: its
// code and message when it is the API's envelope.
func refusal(res *http.Response) error {
	got, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var env apierr.Envelope
	if json.Unmarshal(got, &env) == nil && env.Code != "" {
		return &refused{status: res.StatusCode, code: string(env.Code), message: env.Message}
	}
	return &refused{status: res.StatusCode, message: res.Status}
}

// sseEvent is an event of a stream: its type, id and data.
type sseEvent struct {
	name, id string
	data     []byte
}

// next is the next event, comments passed over.
func (p *peerStream) next() (sseEvent, error) {
	for {
		if i := bytes.Index(p.pending, []byte("\n\n")); i >= 0 {
			block := p.pending[:i]
			p.pending = p.pending[i+2:]
			if ev, ok := parseEvent(block); ok {
				return ev, nil
			}
			continue
		}
		if len(p.pending) > maxPeerEvent {
			return sseEvent{}, fmt.Errorf("its stream sent an event over %d MiB", maxPeerEvent>>20)
		}
		b, err := p.frame()
		if err != nil {
			return sseEvent{}, err
		}
		p.pending = append(p.pending, b...)
	}
}

// parseEvent reads one block of an event stream: false for a comment or
// a block without a type.
func parseEvent(block []byte) (sseEvent, bool) {
	var ev sseEvent
	for line := range bytes.SplitSeq(block, []byte("\n")) {
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			ev.name = string(value)
		case "id":
			ev.id = string(value)
		case "data":
			if ev.data != nil {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, value...)
		}
	}
	return ev, ev.name != ""
}

// cursor is where a fleet's stream is in each replica's journal.
type cursor struct {
	at    map[string]uint64 // a replica's id → the order of its newest entry sent, or its Start
	order []string          // the replicas, in the order first followed
	floor time.Time         // where a replica not in at begins
}

// validReplicaID reports whether s is what a replica's id may be.
func validReplicaID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// parseCursor reads a Last-Event-ID of a fleet's stream: false when it is
// not one.
func parseCursor(s string) (*cursor, bool) {
	c := &cursor{at: map[string]uint64{}}
	parts := strings.Split(s, ",")
	if len(parts) > maxCursorParts {
		return nil, false
	}
	for _, part := range parts {
		if ms, ok := strings.CutPrefix(part, "@"); ok {
			n, err := strconv.ParseInt(ms, 10, 64)
			if err != nil || n < 0 || !c.floor.IsZero() {
				return nil, false
			}
			c.floor = time.UnixMilli(n)
			continue
		}
		id, n, ok := strings.Cut(part, ":")
		seq, err := strconv.ParseUint(n, 10, 64)
		if _, again := c.at[id]; !ok || err != nil || !validReplicaID(id) || again {
			return nil, false
		}
		c.at[id] = seq
		c.order = append(c.order, id)
	}
	if c.floor.IsZero() || len(c.order) == 0 {
		return nil, false
	}
	return c, true
}

// set moves replica's position to seq, never back.
func (c *cursor) set(replica string, seq uint64) {
	if old, ok := c.at[replica]; !ok || seq > old {
		c.place(replica, seq)
	}
}

// place puts replica's position at seq.
func (c *cursor) place(replica string, seq uint64) {
	if _, ok := c.at[replica]; !ok {
		c.order = append(c.order, replica)
	}
	c.at[replica] = seq
}

// keepOnly forgets the positions of the replicas keep says no to.
func (c *cursor) keepOnly(keep func(string) bool) {
	c.order = slices.DeleteFunc(c.order, func(id string) bool {
		if keep(id) {
			return false
		}
		delete(c.at, id)
		return true
	})
}

// appendID appends the cursor as an event's id, first's position first.
func (c *cursor) appendID(b []byte, first string, now time.Time) []byte {
	b = strconv.AppendUint(append(append(b, first...), ':'), c.at[first], 10)
	for _, id := range c.order {
		if id != first {
			b = strconv.AppendUint(append(append(append(b, ','), id...), ':'), c.at[id], 10)
		}
	}
	return strconv.AppendInt(append(b, ",@"...), now.UnixMilli(), 10)
}

// peerEvent is what a follower reads of its peer.
type peerEvent struct {
	from    *follower
	kind    peerEventKind
	entry   merged // an entry
	dropped uint64 // dropped: how many
	seq     uint64 // position: the peer's Start, or the newest sent
	resumed bool   // position: whether the peer still kept what followed the cursor
	err     error  // end: why
}

type peerEventKind int

const (
	peerEntryEvent peerEventKind = iota
	peerDropped
	peerPosition
	peerEnd
)

// follower follows one peer's stream.
type follower struct {
	replica fleet.Replica
	cancel  context.CancelFunc
	started time.Time
	placed  bool          // its position came: it answers
	live    chan struct{} // closed when what it sends may be written as it comes
}

// followPeer opens r's stream (query, and Last-Event-ID when lastID is
// not "") for who, and sends what it reads to out until ctx ends or the
// stream does: its entries, its drops, its position once its replay is
// sent; then, once fl.live is closed, what comes; last, peerEnd.
func (s *Server) followPeer(ctx context.Context, fl *follower, query url.Values, lastID string, who fleet.Identity, out chan<- peerEvent) {
	send := func(ev peerEvent) bool {
		ev.from = fl
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	err := s.readPeerStream(ctx, fl, query, lastID, who, send)
	if ctx.Err() == nil {
		send(peerEvent{kind: peerEnd, err: err})
	}
}

func (s *Server) readPeerStream(ctx context.Context, fl *follower, query url.Values, lastID string, who fleet.Identity, send func(peerEvent) bool) error {
	u, err := url.Parse(fl.replica.URL)
	if err != nil {
		return fmt.Errorf("its advertised URL is not one: %v", err)
	}
	u.Path, u.RawPath, u.RawQuery = "/api/v1/requests/stream", "", query.Encode()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return err
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	// Compressed, frames would be held back until a block is full.
	req.Header.Set("Accept-Encoding", "identity")
	s.fleetKey.Sign(req, nil, fl.replica.ID, fl.replica.URL, who, time.Now())
	res, err := peerClient.Do(req)
	if err != nil {
		return fmt.Errorf("no answer: %s", clip(fmt.Sprint(errors.Unwrap(err))))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK && res.Header.Get("Content-Type") != framesType {
		// Refused before its stream began (a signature that does not
		// hold): the refusal says why, unsigned.
		return refusal(res)
	}
	if res.Header.Get("Content-Type") != framesType {
		return errNotFrames
	}
	// A peer that sends nothing, not even its keep-alive, for three of
	// them is gone.
	var silent atomic.Bool
	idle := time.AfterFunc(peerSilence, func() {
		silent.Store(true)
		cancel()
	})
	defer idle.Stop()
	ps := newPeerStream(res.Body, s.fleetKey, req, res.StatusCode)
	ps.onFrame = func() { idle.Reset(peerSilence) }
	if res.StatusCode != http.StatusOK {
		got, err := ps.body(64 << 10)
		if err != nil {
			return err
		}
		var env apierr.Envelope
		if json.Unmarshal(got, &env) == nil && env.Code != "" {
			return &refused{status: res.StatusCode, code: string(env.Code), message: env.Message}
		}
		return &refused{status: res.StatusCode, message: res.Status}
	}
	placed := false
	replayed := 0
	for {
		ev, err := ps.next()
		if err != nil {
			if silent.Load() {
				return fmt.Errorf("its stream sent nothing for %s", peerSilence)
			}
			if err == io.EOF {
				return errors.New("its stream ended")
			}
			return fmt.Errorf("its stream broke off: %s", clip(err.Error()))
		}
		var out peerEvent
		switch ev.name {
		case "request":
			seq, err := strconv.ParseUint(ev.id, 10, 64)
			if err != nil {
				return errors.New("its stream sent an entry without its order")
			}
			m, err := peerEntry(ev.data, fl.replica.ID)
			if err != nil {
				return errors.New("its stream sent an entry that is not one")
			}
			m.replica, m.seq = fl.replica.ID, seq
			if !placed {
				if replayed++; replayed > journal.MaxLimit {
					return fmt.Errorf("its stream replayed more than %d entries", journal.MaxLimit)
				}
			}
			out = peerEvent{kind: peerEntryEvent, entry: m}
		case "dropped":
			var d struct {
				Dropped uint64 `json:"dropped"`
			}
			if json.Unmarshal(ev.data, &d) != nil {
				return errors.New("its stream sent a drop that is not one")
			}
			out = peerEvent{kind: peerDropped, dropped: d.Dropped}
		case "position":
			var p struct {
				Seq     uint64 `json:"seq"`
				Resumed bool   `json:"resumed"`
			}
			if placed || json.Unmarshal(ev.data, &p) != nil {
				return errors.New("its stream sent a position that is not one")
			}
			placed = true
			out = peerEvent{kind: peerPosition, seq: p.Seq, resumed: p.Resumed}
		default:
			continue
		}
		if !send(out) {
			return ctx.Err()
		}
		if out.kind == peerPosition {
			select {
			case <-fl.live:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// fleetStream is one client's stream of the fleet's journals.
type fleetStream struct {
	s        *Server
	st       *stream // this replica's part, and the writing
	self     string
	caller   Caller
	peerQ    url.Values // the filters every peer is asked with
	cur      *cursor
	followed map[string]*follower
	gone     map[string]missing // why a replica is not followed
	events   chan peerEvent
	lastSaid []byte // the replicas event last written
	ctx      context.Context
}

// peerQuery is what the follower of a replica asks: the filters, at most
// MaxLimit entries replayed, after the cursor's position of it when it
// has one, else after since (all it keeps when since is zero).
func (fs *fleetStream) peerQuery(id string, since time.Time) (url.Values, string) {
	q := url.Values{}
	for k, v := range fs.peerQ {
		q[k] = v
	}
	q.Set("local", "true")
	q.Set("limit", strconv.Itoa(journal.MaxLimit))
	if seq, ok := fs.cur.at[id]; ok {
		return q, strconv.FormatUint(seq, 10)
	}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	return q, ""
}

// follow starts following the live peers not followed yet, up to
// maxFollowed, each from its position or since (peerQuery); replay holds
// what they send after it until the replays are written. Why a replica
// cannot be followed is in gone.
func (fs *fleetStream) follow(live []fleet.Replica, gone []missing, since time.Time, replay bool) {
	now := map[string]bool{}
	for _, m := range gone {
		now[m.ID] = true
		if fl, ok := fs.followed[m.ID]; ok && fl.placed {
			continue // it answers still: it is lost to the registry only
		}
		fs.gone[m.ID] = m
	}
	who := fs.s.identity(fs.caller)
	for _, r := range live {
		now[r.ID] = true
		if _, ok := fs.followed[r.ID]; ok {
			continue
		}
		if len(fs.followed) >= maxFollowed {
			fs.gone[r.ID] = missingOf(r, fmt.Errorf("a stream follows at most %d peers", maxFollowed))
			continue
		}
		ctx, cancel := context.WithCancel(fs.ctx)
		fl := &follower{replica: r, cancel: cancel, started: time.Now(), live: make(chan struct{})}
		if !replay {
			close(fl.live)
		}
		fs.followed[r.ID] = fl
		q, lastID := fs.peerQuery(r.ID, since)
		go fs.s.followPeer(ctx, fl, q, lastID, who, fs.events)
	}
	// A replica gone from the registry (its row deleted) is no longer
	// followed, said missing, nor in the cursor.
	for id, fl := range fs.followed {
		if !now[id] {
			fl.cancel()
			delete(fs.followed, id)
		}
	}
	for id := range fs.gone {
		if !now[id] {
			delete(fs.gone, id)
		}
	}
	fs.cur.keepOnly(func(id string) bool { return now[id] || id == fs.self })
}

// lose ends following fl, missing for why.
func (fs *fleetStream) lose(fl *follower, why error) {
	fl.cancel()
	if fs.followed[fl.replica.ID] == fl {
		delete(fs.followed, fl.replica.ID)
		fs.gone[fl.replica.ID] = missingOf(fl.replica, why)
	}
}

// late loses the followers whose position did not come within peerTimeout.
func (fs *fleetStream) late(now time.Time) {
	for _, fl := range fs.followed {
		if !fl.placed && now.Sub(fl.started) > peerTimeout {
			fs.lose(fl, fmt.Errorf("no answer within %s", peerTimeout))
		}
	}
}

// replicas is what the stream says of the fleet now.
func (fs *fleetStream) replicas() replicasAnswer {
	a := replicasAnswer{Answered: []string{fs.self}, Missing: []missing{}}
	for _, id := range slices.Sorted(mapKeys(fs.followed)) {
		if fs.followed[id].placed {
			a.Answered = append(a.Answered, id)
		}
	}
	for _, id := range slices.Sorted(mapKeys(fs.gone)) {
		if fl, ok := fs.followed[id]; !ok || !fl.placed {
			a.Missing = append(a.Missing, fs.gone[id])
		}
	}
	return a
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sayReplicas appends the event replicas when what it says changed.
func (fs *fleetStream) sayReplicas(b []byte) []byte {
	said, _ := json.Marshal(fs.replicas())
	if bytes.Equal(said, fs.lastSaid) {
		return b
	}
	fs.lastSaid = said
	b = append(b, "event: replicas\ndata: "...)
	return append(append(b, said...), "\n\n"...)
}

// appendEntry appends an entry of replica as the event request, its id
// the cursor.
func (fs *fleetStream) appendEntry(b []byte, replica string, raw []byte) []byte {
	b = fs.cur.appendID(append(b, "event: request\nid: "...), replica, time.Now())
	b = append(append(b, "\ndata: "...), raw...)
	return append(b, "\n\n"...)
}

// appendCursor appends an event without data that moves an EventSource's
// Last-Event-ID to the cursor.
func (fs *fleetStream) appendCursor(b []byte) []byte {
	b = fs.cur.appendID(append(b, "id: "...), fs.self, time.Now())
	return append(b, "\n\n"...)
}

// appendDropped appends the event dropped: n entries of replica lost.
func appendDropped(b []byte, replica string, n uint64) []byte {
	id, _ := json.Marshal(replica)
	return fmt.Appendf(b, "event: dropped\ndata: {\"dropped\":%d,\"replica\":%s}\n\n", n, id)
}

// streamFleet is GET /api/v1/requests/stream of every live replica.
func (s *Server) streamFleet(w http.ResponseWriter, r *http.Request, q url.Values, f *journal.Filter, visible func(string) bool) {
	self := s.Fleet.Self().ID
	_, caller := s.policy(r)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	opened := time.Now()
	sub := s.journal.Subscribe(func(e *journal.Entry) bool { return visible(e.Proxy) && f.Matches(e) })
	defer s.journal.Unsubscribe(sub)

	// Where each replica begins: after what the query replays (since,
	// limit: merged as the list merges), else after the cursor's
	// position of it, else after the cursor's time (or now).
	replay := f.Replays()
	userSince, sinceID := f.Since()
	cur := &cursor{at: map[string]uint64{}, floor: opened}
	notice := ": the fleet's entries follow\n\n"
	if id := r.Header.Get("Last-Event-ID"); id != "" && !replay {
		if c, ok := parseCursor(id); ok {
			cur = c
		} else {
			notice = ": the last event's id is not one of a fleet's stream; new entries follow\n\n"
		}
	}
	fs := &fleetStream{s: s, self: self, caller: caller, cur: cur, ctx: ctx,
		followed: map[string]*follower{}, gone: map[string]missing{}, events: make(chan peerEvent, peerEventsQueued)}
	fs.peerQ = url.Values{}
	for k, v := range q {
		if k != "since" && k != "limit" {
			fs.peerQ[k] = v
		}
	}
	// This replica's replay: what the query selects, else what followed
	// its position in the cursor, else what followed the cursor's time; a
	// stream that resumes nothing replays nothing (what was recorded
	// since it subscribed comes live).
	var mine *journal.Filter
	var kept []*journal.Entry
	switch seq, ok := cur.at[self]; {
	case replay && !userSince.IsZero():
		mine = f.After(userSince)
	case replay:
		mine = f.Widened()
	case ok:
		mine, kept = f.Widened(), s.journal.Entries()
		if !mine.ResumeAt(seq, sub.Start(), kept) {
			notice = ": some of this replica's entries after the last event are no longer kept\n\n" + notice
		}
	case len(cur.order) > 0:
		mine = f.After(cur.floor)
	}
	var all []merged
	if mine != nil {
		if kept == nil {
			kept = s.journal.Entries()
		}
		local, err := mine.Select(kept, visible)
		if err != nil {
			filterFailed(w, err)
			return
		}
		for _, e := range local {
			m := localEntry(e, self)
			m.replica, m.seq = self, e.Seq()
			all = append(all, m)
		}
	}
	starts := map[string]uint64{self: sub.Start()}

	// The peers' replays, each within peerTimeout and the answers'
	// budget; what they send after waits until the replays are written.
	live, gone := s.livePeers(ctx)
	since := cur.floor
	if replay {
		since = userSince // zero for a since of an id or a limit alone: their newest
	}
	fs.follow(live, gone, since, true)
	budget := int64(maxFleetAnswers)
	var dropped uint64
	timer := time.NewTimer(peerTimeout)
	defer timer.Stop()
	for waiting := len(fs.followed); waiting > 0; {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			for _, fl := range fs.followed {
				if !fl.placed {
					fs.lose(fl, fmt.Errorf("no answer within %s", peerTimeout))
				}
			}
			waiting = 0
		case ev := <-fs.events:
			fl := ev.from
			if fs.followed[fl.replica.ID] != fl {
				continue
			}
			switch ev.kind {
			case peerEntryEvent:
				if budget -= int64(len(ev.entry.raw)); budget < 0 {
					fs.lose(fl, fmt.Errorf("the fleet's replays are over %d MiB", maxFleetAnswers>>20))
					waiting--
					continue
				}
				all = append(all, ev.entry)
			case peerDropped:
				dropped += ev.dropped
			case peerPosition:
				fl.placed = true
				starts[fl.replica.ID] = ev.seq
				if !ev.resumed {
					notice = ": some of replica " + fl.replica.ID + "'s entries after the last event are no longer kept\n\n" + notice
				}
				waiting--
			case peerEnd:
				fs.lose(fl, ev.err)
				waiting--
			}
		}
	}
	// Entries of a replica lost during its replay are not written: the
	// cursor would say they were.
	all = slices.DeleteFunc(all, func(m merged) bool {
		_, ok := starts[m.replica]
		return !ok
	})
	slices.SortStableFunc(all, byTime)
	if replay {
		var err error
		if all, _, err = pickMerged(all, userSince, sinceID, f.Limit()); err != nil {
			filterFailed(w, err)
			return
		}
	}

	rc := beginEvents(w)
	st := &stream{w: w, flush: rc.Flush, sub: sub, turns: s.streams.turns, sent: map[uint64]struct{}{}, fleet: fs}
	fs.st = st
	out := fs.sayReplicas(nil)
	out = append(out, notice...)
	if dropped > 0 {
		out = fmt.Appendf(out, "event: dropped\ndata: {\"dropped\":%d}\n\n", dropped)
	}
	// A replica's position moves past its replay only with its last
	// entry replayed (they are in order of time, not of recording): a
	// client that leaves before then resumes with none lost.
	first, last := map[string]uint64{}, map[string]int{}
	for i, m := range all {
		if f, ok := first[m.replica]; !ok || m.seq < f {
			first[m.replica] = m.seq
		}
		last[m.replica] = i
	}
	// After its replay a replica is at its Start, not past the newest
	// replayed: an entry numbered below that may still come live (the
	// stream's own set of those sent keeps it from being sent twice).
	for id, start := range starts {
		if f, ok := first[id]; ok {
			if _, had := cur.at[id]; !had {
				cur.place(id, f-1)
			}
		} else {
			cur.place(id, start)
		}
	}
	for i, m := range all {
		if m.replica == self {
			st.sent[m.seq] = struct{}{}
		}
		if last[m.replica] == i {
			cur.place(m.replica, starts[m.replica])
		}
		out = fs.appendEntry(out, m.replica, m.raw)
		if len(out) >= streamKeep {
			if _, err := w.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
	out = fs.appendCursor(out)
	if _, err := w.Write(out); err != nil || rc.Flush() != nil {
		return
	}
	for _, fl := range fs.followed {
		close(fl.live)
	}
	st.follow(ctx)
}

// tick follows the peers that joined, loses those late to begin, and
// says which replicas answer when that changed.
func (fs *fleetStream) tick(ctx context.Context, now time.Time) error {
	fs.late(now)
	live, gone := fs.s.livePeers(ctx)
	if registryFailed(gone) {
		return nil // the registry did not answer: keep following
	}
	fs.follow(live, gone, fs.cur.floor, false)
	_, err := fs.st.w.Write(fs.sayReplicas(nil))
	return err
}

// relay writes ev and what else the peers sent meanwhile, up to
// streamKeep bytes.
func (fs *fleetStream) relay(ev peerEvent) error {
	out := fs.st.out[:0]
	for {
		fl := ev.from
		if fs.followed[fl.replica.ID] == fl {
			switch ev.kind {
			case peerEntryEvent:
				fs.cur.set(fl.replica.ID, ev.entry.seq)
				out = fs.appendEntry(out, fl.replica.ID, ev.entry.raw)
			case peerDropped:
				out = appendDropped(out, fl.replica.ID, ev.dropped)
			case peerPosition:
				fl.placed = true
				delete(fs.gone, fl.replica.ID)
				if ev.resumed {
					fs.cur.set(fl.replica.ID, ev.seq)
				} else {
					// Its journal is not where the cursor was (cleared,
					// restarted): its own position from now.
					fs.cur.place(fl.replica.ID, ev.seq)
				}
				if !ev.resumed {
					out = append(out, ": some of replica "+fl.replica.ID+"'s entries after the last event are no longer kept\n\n"...)
				}
				out = fs.sayReplicas(fs.appendCursor(out))
			case peerEnd:
				fs.lose(fl, ev.err)
				out = fs.sayReplicas(out)
			}
		}
		if len(out) >= streamKeep {
			break
		}
		select {
		case ev = <-fs.events:
			continue
		default:
		}
		break
	}
	fs.st.out = out
	_, err := fs.st.w.Write(out)
	return err
}

// pickMerged is since and limit applied to merged entries, oldest first:
// after the newest entry of the id sinceID (a retry reuses its id), else
// after at, the newest limit of them, and how many older matched.
func pickMerged(all []merged, at time.Time, sinceID string, limit int) ([]merged, int, error) {
	if sinceID != "" {
		start := -1
		for j := len(all) - 1; j >= 0 && start < 0; j-- {
			if all[j].id == sinceID {
				start = j + 1
			}
		}
		if start < 0 {
			return nil, 0, &journal.ParamError{Param: "since", Reason: fmt.Sprintf("%q is neither an RFC 3339 time nor the id of an entry any replica keeps", sinceID)}
		}
		all = all[start:]
	} else if !at.IsZero() {
		all = slices.DeleteFunc(all, func(m merged) bool { return !m.time.After(at) })
	}
	more := 0
	if len(all) > limit {
		more = len(all) - limit
		all = all[more:]
	}
	return all, more, nil
}
