package admin

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/apierr"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/journal"
)

// The journal is read fleet-wide (SPEC §18.1): the replica asked
// authorizes the caller, then asks every live peer for its part in a call
// signed with the fleet key, carrying the caller's identity and never the
// token, checks the peer's signature of its answer, and merges the answers
// by time.

// peerTimeout bounds each peer's answer; maxPeerAnswer its size, as a
// journal read of MaxLimit entries of the largest kept is bounded.
const (
	peerTimeout   = 2 * time.Second
	maxPeerAnswer = 64 << 20
)

// fleetCaller carries the identity a verified peer call names.
type fleetCaller struct{}

// fleetRoutes are the calls a peer may sign: the journal's reads and its
// clearing, nothing that writes the configuration.
var fleetRoutes = map[string]bool{"GET /api/v1/requests": true, "GET /api/v1/requests/stream": true, "POST /api/v1/requests/verify": true, "DELETE /api/v1/requests": true}

// verifyPeer checks a call that claims to be a peer's: one the fleet key
// signed for this replica, once, to a route peers call. It returns the
// request with the identity it names, or answers 401 and false.
func (s *Server) verifyPeer(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if !fleetRoutes[r.Method+" "+r.URL.Path] {
		apierr.Write(w, apierr.Unauthorized, "a fleet call may only read or clear the journal")
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxVerifyBody+1))
	if err != nil || len(body) > maxVerifyBody {
		apierr.Write(w, apierr.Unauthorized, "a fleet call's body could not be read, or is over its bound")
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	who, err := s.verifier.Verify(r, body, time.Now())
	if err != nil {
		apierr.Write(w, apierr.Unauthorized, err.Error())
		return nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), fleetCaller{}, who)), true
}

// signedAnswer holds a peer's answer to a fleet call until it is whole,
// then sends it with the fleet key's signature of it, so that the replica
// asked takes nothing a row someone else wrote answered.
type signedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func (a *signedAnswer) Header() http.Header { return a.header }

func (a *signedAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *signedAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.body.Len()+len(b) > maxPeerAnswer {
		a.over = true
		return 0, errors.New("the answer is over the bound of a fleet call's")
	}
	return a.body.Write(b)
}

// send writes the answer to w, signed for the call r.
func (a *signedAnswer) send(w http.ResponseWriter, r *http.Request, key fleet.Key) {
	if a.over {
		apierr.Write(w, apierr.InternalError, fmt.Sprintf("this replica's part is over %d MiB", maxPeerAnswer>>20))
		return
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.Header().Set(fleet.HeaderAnswer, key.SignAnswer(r.Header.Get(fleet.HeaderNonce), a.status, a.body.Bytes()))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body.Bytes())
}

// peerCaller is the caller a verified peer call names, as this replica
// knows that token: the same name, group and value (by its proof), else
// anonymous, so that nothing widens.
func (s *Server) peerCaller(r *http.Request, doc *config.Document) (Caller, bool) {
	who, ok := r.Context().Value(fleetCaller{}).(fleet.Identity)
	if !ok {
		return Caller{}, false
	}
	if who.Name != "" {
		for _, t := range tokensInForce(doc, s.env) {
			if string(t.Name) == who.Name && string(t.Group) == who.Group && hmac.Equal([]byte(s.fleetKey.Proof(string(t.Value))), []byte(who.Proof)) {
				return Caller{Name: t.Name, Group: t.Group}, true
			}
		}
	}
	return Caller{Anonymous: true, sent: sentNothing, header: string(doc.Admin.Auth.Header)}, true
}

// missing is a replica whose part is not in an answer.
type missing struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	State string `json:"state"`
	Error string `json:"error"`
	cause error  // what Error says, for the caller to tell kinds apart
}

// missingOf is r missing for why, what a row or a peer said clipped.
func missingOf(r fleet.Replica, why error) missing {
	return missing{ID: clip(r.ID), URL: clip(r.URL), State: r.State, Error: why.Error(), cause: why}
}

// said is each replica missing with why, for a message.
func said(ms []missing) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.ID + " (" + m.Error + ")"
	}
	return strings.Join(names, ", ")
}

// writeUnavailable answers REPLICA_UNAVAILABLE with what the fleet said.
func writeUnavailable(w http.ResponseWriter, message string, fleet replicasAnswer) {
	b, _ := json.Marshal(struct {
		apierr.Envelope
		Replicas replicasAnswer `json:"replicas"`
	}{apierr.Envelope{Status: "error", Code: apierr.ReplicaUnavailable, Message: message}, fleet})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(apierr.ReplicaUnavailable.Status())
	_, _ = w.Write(append(b, '\n'))
}

// refused is a peer's error answer.
type refused struct {
	status        int
	code, message string
}

func (e *refused) Error() string {
	if e.code == "" {
		return "it answered " + clip(e.message)
	}
	return fmt.Sprintf("it answered %d %s: %s", e.status, clip(e.code), clip(e.message))
}

// replicasAnswer is what an answer says of the fleet: who answered, who
// did not.
type replicasAnswer struct {
	Answered []string  `json:"answered"`
	Missing  []missing `json:"missing"`
}

// peerAnswer is one peer's part.
type peerAnswer struct {
	replica fleet.Replica
	body    []byte
	err     error
}

// askPeers sends the call method path?query to every live peer, signed on
// behalf of the caller, and returns what each answered (status want), and
// the replicas that did not or could not be asked.
func (s *Server) askPeers(ctx context.Context, method, path string, query url.Values, body []byte, caller Caller, want int) ([]peerAnswer, []missing) {
	live, gone := s.livePeers(ctx)
	if registryFailed(gone) {
		return nil, gone
	}
	who := s.identity(caller)
	answers := make([]peerAnswer, len(live))
	var wg sync.WaitGroup
	turns := make(chan struct{}, peersAtOnce)
	budget := &atomic.Int64{}
	budget.Store(maxFleetAnswers)
	for i, r := range live {
		wg.Go(func() {
			turns <- struct{}{}
			defer func() { <-turns }()
			got, err := s.askPeer(ctx, r, method, path, query, body, who, want, budget)
			answers[i] = peerAnswer{replica: r, body: got, err: err}
		})
	}
	wg.Wait()
	var out []peerAnswer
	for _, a := range answers {
		if a.err != nil {
			gone = append(gone, missingOf(a.replica, a.err))
			continue
		}
		out = append(out, a)
	}
	return out, gone
}

// livePeers reads the registry: the peers to call, and the replicas that
// cannot be (lost, without a URL peers call, or all of them when this
// replica has no fleet key). When the registry cannot be read, gone is
// the one replica "*" saying why.
func (s *Server) livePeers(ctx context.Context) (live []fleet.Replica, gone []missing) {
	self := s.Fleet.Self()
	listing, cancel := context.WithTimeout(ctx, fleetTimeout)
	rs, err := s.Fleet.List(listing)
	cancel()
	if err != nil {
		return nil, []missing{{ID: "*", State: "unknown", Error: "cannot read the registry of replicas: " + err.Error()}}
	}
	for _, r := range rs {
		switch {
		case r.ID == self.ID:
		case r.State != fleet.Live:
			gone = append(gone, missingOf(r, errors.New("no heartbeat for 10 s")))
		case s.fleetKey == nil:
			gone = append(gone, missingOf(r, errors.New("no fleet key")))
		case r.URL == "":
			gone = append(gone, missingOf(r, errors.New("it has no admin listener")))
		case fleet.CheckAdvertise(r.URL) != nil:
			gone = append(gone, missingOf(r, errors.New("its registered URL is not one peers call")))
		default:
			live = append(live, r)
		}
	}
	return live, gone
}

// registryFailed reports whether gone says the registry could not be read.
func registryFailed(gone []missing) bool { return len(gone) == 1 && gone[0].ID == "*" }

// identity is what a fleet call says of caller.
func (s *Server) identity(caller Caller) fleet.Identity {
	if caller.Anonymous {
		return fleet.Identity{}
	}
	return fleet.Identity{Name: string(caller.Name), Group: string(caller.Group), Proof: s.fleetKey.Proof(string(caller.value))}
}

// peerClient calls peers; never through an environment's proxy, which
// would see the calls.
var peerClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: peerTimeout, IdleConnTimeout: 30 * time.Second},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// peersAtOnce bounds the peers asked at once; maxFleetAnswers what all
// their answers to one call may take.
const (
	peersAtOnce     = 16
	maxFleetAnswers = 256 << 20
)

// clip is s cut to what an answer repeats of what a peer or a row said.
func clip(s string) string {
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// askPeer is one signed call, within peerTimeout, its answer within
// maxPeerAnswer and what is left of budget, signed by the fleet key.
func (s *Server) askPeer(ctx context.Context, r fleet.Replica, method, path string, query url.Values, body []byte, who fleet.Identity, want int, budget *atomic.Int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("its advertised URL is not one: %v", err)
	}
	u.Path, u.RawPath, u.RawQuery = path, "", query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	s.fleetKey.Sign(req, body, r.ID, r.URL, who, time.Now())
	res, err := peerClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer: %s", clip(fmt.Sprint(errors.Unwrap(err))))
	}
	defer res.Body.Close()
	// What this answer may take is taken from the budget before it is
	// read, and what it did not take is given back.
	var limit int64
	for {
		left := budget.Load()
		limit = min(int64(maxPeerAnswer), left)
		if budget.CompareAndSwap(left, left-limit) {
			break
		}
	}
	got, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	budget.Add(limit - min(int64(len(got)), limit))
	switch {
	case err != nil:
		return nil, fmt.Errorf("its answer broke off: %s", clip(err.Error()))
	case int64(len(got)) > limit:
		return nil, fmt.Errorf("its answer is over %d MiB, or the fleet's over %d MiB", maxPeerAnswer>>20, maxFleetAnswers>>20)
	case res.StatusCode != want:
		var env apierr.Envelope
		if json.Unmarshal(got, &env) == nil && env.Code != "" {
			return nil, &refused{status: res.StatusCode, code: string(env.Code), message: env.Message}
		}
		return nil, &refused{status: res.StatusCode, message: res.Status}
	}
	if err := s.fleetKey.CheckAnswer(req, res, got); err != nil {
		return nil, err
	}
	return got, nil
}

// fleetWide reports whether a call reads the fleet: with a registry of
// peers, unless it says local=true (or comes from a peer, which reads its
// own).
func (s *Server) fleetWide(r *http.Request, local bool) bool {
	if local || s.Fleet == nil || !s.Fleet.Shared() {
		return false
	}
	_, fromPeer := r.Context().Value(fleetCaller{}).(fleet.Identity)
	return !fromPeer
}

// localParam reads and removes local from q: true or false.
func localParam(q url.Values) (bool, error) {
	v, ok := q["local"]
	if !ok {
		return false, nil
	}
	delete(q, "local")
	if len(v) != 1 || (v[0] != "true" && v[0] != "false") {
		return false, &journal.ParamError{Param: "local", Reason: "is true or false"}
	}
	return v[0] == "true", nil
}

// merged is one entry of a fleet-wide list, as JSON with its replica.
type merged struct {
	time    time.Time
	id      string
	raw     []byte
	replica string // a stream's: whose entry
	seq     uint64 // a stream's: its order in that replica's journal
}

// peerEntry is a peer's entry as this replica writes it: decoded and
// encoded again, so that nothing but an entry's fields reaches an answer,
// with "replica" the peer's.
func peerEntry(raw json.RawMessage, replica string) (merged, error) {
	var e journal.Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return merged{}, err
	}
	b, err := json.Marshal(&e)
	if err != nil {
		return merged{}, err
	}
	return merged{time: e.Time, id: e.ID, raw: withReplica(b, replica)}, nil
}

// peerEntries are a peer's entries as peerEntry makes them.
func peerEntries(raws []json.RawMessage, replica string) ([]merged, error) {
	out := make([]merged, 0, len(raws))
	for _, raw := range raws {
		m, err := peerEntry(raw, replica)
		if err != nil {
			return nil, errors.New("its answer holds an entry that is not one")
		}
		out = append(out, m)
	}
	return out, nil
}

// localEntry is an entry of this replica's journal, with its id.
func localEntry(e *journal.Entry, self string) merged {
	raw, _ := json.Marshal(e)
	return merged{time: e.Time, id: e.ID, raw: withReplica(raw, self)}
}

// byTime orders merged entries oldest first, ties by id.
func byTime(a, b merged) int {
	if c := a.time.Compare(b.time); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// withReplica is an entry's JSON with "replica" first.
func withReplica(raw []byte, replica string) []byte {
	id, _ := json.Marshal(replica)
	out := make([]byte, 0, len(raw)+len(id)+12)
	out = append(out, `{"replica":`...)
	out = append(out, id...)
	if len(raw) > 2 {
		out = append(out, ',')
	}
	return append(out, raw[1:]...)
}

// fleetPage is the merged journal of the live replicas.
type fleetPage struct {
	all      []merged // oldest first
	dropped  uint64
	more     int
	answered []string
	gone     []missing
}

// gatherFleet lists f of every live replica's journal (q, f's query),
// merged by time (ties by id), since and limit applying after the merge.
func (s *Server) gatherFleet(r *http.Request, q url.Values, f *journal.Filter, visible func(string) bool) (*fleetPage, error) {
	self := s.Fleet.Self().ID
	wide := f.Widened()
	page, err := s.journal.List(wide, visible)
	if err != nil {
		return nil, err
	}
	out := &fleetPage{dropped: s.journal.Dropped(), more: page.More, answered: []string{self}}
	_ = page.Each(func(e *journal.Entry) error {
		out.all = append(out.all, localEntry(e, self))
		return nil
	})
	// Each peer's newest limit of the same filters: the newest limit of
	// the merge are among them. A since of a time is each peer's too; one
	// of an entry's id applies here, over each peer's newest MaxLimit.
	peerQuery := url.Values{}
	for k, v := range q {
		if k != "since" && k != "limit" {
			peerQuery[k] = v
		}
	}
	at, sinceID := f.Since()
	peerQuery.Set("limit", strconv.Itoa(f.Limit()))
	if sinceID != "" {
		peerQuery.Set("limit", strconv.Itoa(journal.MaxLimit))
	} else if !at.IsZero() {
		peerQuery.Set("since", at.UTC().Format(time.RFC3339Nano))
	}
	peerQuery.Set("local", "true")
	_, caller := s.policy(r)
	answers, gone := s.askPeers(r.Context(), "GET", "/api/v1/requests", peerQuery, nil, caller, http.StatusOK)
	for _, a := range answers {
		var part struct {
			Requests []json.RawMessage `json:"requests"`
			Dropped  uint64            `json:"dropped"`
			More     int               `json:"more"`
		}
		if err := json.Unmarshal(a.body, &part); err != nil || len(part.Requests) > journal.MaxLimit {
			gone = append(gone, missingOf(a.replica, errors.New("its answer is not a list of requests")))
			continue
		}
		entries, err := peerEntries(part.Requests, a.replica.ID)
		if err != nil {
			gone = append(gone, missingOf(a.replica, err))
			continue
		}
		out.all = append(out.all, entries...)
		out.dropped += part.Dropped
		out.more += part.More
		out.answered = append(out.answered, a.replica.ID)
	}
	slices.SortStableFunc(out.all, byTime)
	var more int
	if out.all, more, err = pickMerged(out.all, at, sinceID, f.Limit()); err != nil {
		return nil, err
	}
	out.more += more
	if gone == nil {
		gone = []missing{}
	}
	out.gone = gone
	return out, nil
}

// listFleet is GET /api/v1/requests of every live replica.
func (s *Server) listFleet(w http.ResponseWriter, r *http.Request, q url.Values, f *journal.Filter, visible func(string) bool) {
	page, err := s.gatherFleet(r, q, f, visible)
	if err != nil {
		filterFailed(w, err)
		return
	}
	fleetJSON, _ := json.Marshal(replicasAnswer{Answered: page.answered, Missing: page.gone})
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"requests":[`)
	for i, m := range page.all {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(m.raw)
	}
	_, _ = bw.WriteString(`],"dropped":` + strconv.FormatUint(page.dropped, 10) + `,"more":` + strconv.Itoa(page.more) + `,"replicas":`)
	_, _ = bw.Write(fleetJSON)
	_, _ = bw.WriteString("}\n")
	_ = bw.Flush()
}

// maxFleetPoints bounds the entries a fleet-wide verification reads: past
// it, the caller is asked to narrow match.
const maxFleetPoints = 100_000

// verifyPart is a peer's part of a fleet's verification: the points of
// what it matched and its newest MaxRefuted entries.
func (s *Server) verifyPart(w http.ResponseWriter, v *journal.Verification, visible func(string) bool) {
	points, newest := s.journal.Matched(v, visible)
	if len(points) > maxFleetPoints {
		apierr.Write(w, apierr.ConfigInvalid, tooManyMatched)
		return
	}
	writeJSON(w, http.StatusOK, verifyPartAnswer{Points: points, Shown: newest})
}

// tooManyMatched says a verification matched more than a fleet reads.
var tooManyMatched = fmt.Sprintf("match: more than %d entries matched across the fleet; narrow match (a proxy, a path, a session)", maxFleetPoints)

type verifyPartAnswer struct {
	Points []journal.Point  `json:"points"`
	Shown  []*journal.Entry `json:"shown"`
}

// verifyFleet is POST /api/v1/requests/verify over every live replica's
// journal: their points merged by time and checked as one. A replica
// missing refuses the verification with REPLICA_UNAVAILABLE, unless the
// body says partial.
func (s *Server) verifyFleet(w http.ResponseWriter, r *http.Request, body []byte, v *journal.Verification, visible func(string) bool) {
	self := s.Fleet.Self().ID
	points, newest := s.journal.Matched(v, visible)
	if len(points) > maxFleetPoints {
		apierr.Write(w, apierr.ConfigInvalid, tooManyMatched)
		return
	}
	var shown []merged
	for _, e := range newest {
		shown = append(shown, localEntry(e, self))
	}
	_, caller := s.policy(r)
	answers, gone := s.askPeers(r.Context(), "POST", "/api/v1/requests/verify", nil, body, caller, http.StatusOK)
	answered := []string{self}
	for _, a := range answers {
		var part struct {
			Points []journal.Point   `json:"points"`
			Shown  []json.RawMessage `json:"shown"`
		}
		if err := json.Unmarshal(a.body, &part); err != nil || len(part.Points) > maxFleetPoints || len(part.Shown) > journal.MaxRefuted {
			gone = append(gone, missingOf(a.replica, errors.New("its answer is not a part of a verification")))
			continue
		}
		entries, err := peerEntries(part.Shown, a.replica.ID)
		if err != nil {
			gone = append(gone, missingOf(a.replica, err))
			continue
		}
		points = append(points, part.Points...)
		if len(points) > maxFleetPoints {
			apierr.Write(w, apierr.ConfigInvalid, tooManyMatched)
			return
		}
		shown = append(shown, entries...)
		answered = append(answered, a.replica.ID)
	}
	for _, m := range gone {
		// A peer's own part is over the bound: so is the fleet's.
		var no *refused
		if errors.As(m.cause, &no) && no.code == string(apierr.ConfigInvalid) {
			apierr.Write(w, apierr.ConfigInvalid, tooManyMatched)
			return
		}
	}
	if gone == nil {
		gone = []missing{}
	}
	fleetAnswer := replicasAnswer{Answered: answered, Missing: gone}
	if len(gone) > 0 && !v.Partial {
		writeUnavailable(w, fmt.Sprintf("the journals of %d replicas could not be read: %s; a verification of part of the fleet says `\"partial\": true`", len(gone), said(gone)), fleetAnswer)
		return
	}
	slices.SortStableFunc(points, func(a, b journal.Point) int {
		if a.Time != b.Time {
			return cmp.Compare(a.Time, b.Time)
		}
		return strings.Compare(a.ID, b.ID)
	})
	slices.SortStableFunc(shown, byTime)
	writeVerdict(w, v, points, shown, fleetAnswer)
}

// clearFleet clears the journals of every live peer too, as the caller may
// (each peer decides by the caller's rights): 204 when every live one did,
// else REPLICA_UNAVAILABLE naming those that did not (a lost replica's
// journal is said, not waited for).
func (s *Server) clearFleet(w http.ResponseWriter, r *http.Request, q url.Values) {
	peerQuery := url.Values{"local": {"true"}}
	if p := q["proxy"]; len(p) > 0 {
		peerQuery["proxy"] = p
	}
	_, caller := s.policy(r)
	answers, gone := s.askPeers(r.Context(), "DELETE", "/api/v1/requests", peerQuery, nil, caller, http.StatusNoContent)
	answered := []string{s.Fleet.Self().ID}
	for _, a := range answers {
		answered = append(answered, a.replica.ID)
	}
	failed := slices.DeleteFunc(slices.Clone(gone), func(m missing) bool { return m.State == fleet.Lost })
	if len(failed) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeUnavailable(w, fmt.Sprintf("cleared on %d replicas, not on %d: %s; clear again, or with `local=true` the replica asked alone", len(answered), len(failed), said(failed)),
		replicasAnswer{Answered: answered, Missing: gone})
}
