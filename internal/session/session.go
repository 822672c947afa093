// Package session keeps the live sessions (SPEC §17.5): overlays of mocks
// and faults on some proxies, in force only for the requests that carry
// their id, ending by themselves at their expiry. Each session's overlays
// are compiled into proxies of their own when the session is written and
// again whenever the configuration changes; the request path looks one
// up with an atomic load and two map reads.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/shared"
)

// MaxLive bounds the sessions live at once, and MaxLiveBytes what their
// overlays hold together (the bodies their callers wrote; SPEC §18.4).
const (
	MaxLive      = shared.MaxLiveSessions
	MaxLiveBytes = 64 << 20
)

// Session is one live session: what its caller wrote, and its overlays
// compiled against the runtime in force.
type Session struct {
	ID        string
	Revision  string
	ExpiresAt time.Time
	Spec      *config.Session
	// Raw is what the caller wrote for the proxies, to show it back.
	Raw json.RawMessage
	// Proxies are the overlays compiled, by proxy name; a proxy the
	// configuration no longer has is left out.
	Proxies map[string]*runtime.Proxy
}

// Errors a write can meet.
var (
	ErrNotFound = shared.ErrNoSession
	ErrExists   = shared.ErrSessionExists
	ErrFull     = shared.ErrSessionsFull
	ErrRevision = shared.ErrSessionRevision
	ErrTooLarge = fmt.Errorf("the live sessions' overlays would hold more than 64 MiB (%d bytes) together: end a session, or let one expire", MaxLiveBytes)
)

// Shared is where sessions live when every replica of a configuration
// shares them (PostgreSQL): the registry writes there first, and loads
// from there when a replica's write is announced (Sync). The contract sits
// in package shared so that a store implements it without importing this
// package.
type Shared = shared.Sessions

// Stored is a session as Shared keeps it: what its caller wrote.
type Stored = shared.Session

// Registry is the live sessions of this instance.
type Registry struct {
	live   atomic.Pointer[map[string]*Session]
	mu     sync.Mutex // writes, expiry and recompiles
	rt     *runtime.Runtime
	log    *slog.Logger
	now    func() time.Time
	wake   chan struct{}
	shared Shared // nil: in this instance's memory only
	// prepare, when set, is given every overlay compiled, with its
	// session's id, before the overlay is in force (the fleet's counters).
	prepare func(p *runtime.Proxy, session string)
}

// Prepare makes fn see every overlay compiled from now on, before it is in
// force.
func (r *Registry) Prepare(fn func(p *runtime.Proxy, session string)) { r.prepare = fn }

// Share makes sh where the sessions live, from now on.
func (r *Registry) Share(sh Shared) { r.shared = sh }

// Sync loads the shared sessions and puts them in force, compiled over
// the runtime in force; it reports whether it could (a failed load is
// tried again by the caller).
func (r *Registry) Sync(ctx context.Context) bool {
	if r.shared == nil {
		return true
	}
	// Under the lock, so that a write of this replica's cannot land
	// between the load and the swap and be undone by an older snapshot.
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncLocked(ctx, false)
}

// syncLocked is Sync with r.mu held; recompile compiles every session
// anew (the runtime changed), else an unchanged one is kept as it is.
func (r *Registry) syncLocked(ctx context.Context, recompile bool) bool {
	stored, err := r.shared.Load(ctx)
	if err != nil {
		r.log.Warn("cannot load the sessions; the ones in force stay", "error", err.Error())
		return false
	}
	before := r.current()
	next := map[string]*Session{}
	for _, st := range stored {
		spec, err := config.ParseSession(st.Body, r.rt.Document)
		if err != nil {
			r.log.Warn("a stored session no longer fits the configuration; it does not apply here", "session", st.ID, "error", err.Error())
			continue
		}
		if old := before[st.ID]; old != nil && old.Revision == st.Revision && !recompile {
			next[st.ID] = old // unchanged: compiled, and counting, already
			continue
		}
		s := &Session{ID: st.ID, Revision: st.Revision, ExpiresAt: st.ExpiresAt, Spec: spec,
			Raw: proxiesOf(st.Body), Proxies: r.compile(st.ID, spec)}
		if old := before[st.ID]; old != nil {
			carry(old.Proxies, s.Proxies)
		}
		next[st.ID] = s
	}
	r.live.Store(&next)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// proxiesOf is the proxies object of a session's body.
func proxiesOf(body []byte) json.RawMessage {
	var top struct {
		Proxies json.RawMessage `json:"proxies"`
	}
	_ = json.Unmarshal(body, &top)
	return top.Proxies
}

// fits is the overlay body holds, if it fits beside the live sessions'
// but the one of id (which a write replaces); else ErrTooLarge.
func (r *Registry) fits(cur map[string]*Session, id string, body []byte) (json.RawMessage, error) {
	raw := proxiesOf(body)
	if r.liveBytes(cur, id)+len(raw) > MaxLiveBytes {
		return nil, ErrTooLarge
	}
	return raw, nil
}

// liveBytes is what the live sessions' overlays hold but the one of id
// (which a write replaces); an expired one no longer counts.
func (r *Registry) liveBytes(cur map[string]*Session, id string) int {
	now, n := r.now(), 0
	for sid, s := range cur {
		if sid != id && now.Before(s.ExpiresAt) {
			n += len(s.Raw)
		}
	}
	return n
}

// stored is s as Shared keeps it.
func stored(s *Session) Stored {
	body, _ := json.Marshal(struct {
		TTL     *config.SessionTTL `json:"ttl"`
		Proxies json.RawMessage    `json:"proxies"`
	}{s.Spec.TTL, s.Raw})
	return Stored{ID: s.ID, Revision: s.Revision, ExpiresAt: s.ExpiresAt, Body: body}
}

// New makes an empty registry compiling against rt.
func New(rt *runtime.Runtime, log *slog.Logger) *Registry {
	r := &Registry{rt: rt, log: log, now: time.Now, wake: make(chan struct{}, 1)}
	empty := map[string]*Session{}
	r.live.Store(&empty)
	return r
}

// Lookup is the overlay of the session id on the proxy of that name, or
// nil: no such session, expired, or not over that proxy. It takes no lock.
func (r *Registry) Lookup(id, proxy string) *runtime.Proxy {
	s := (*r.live.Load())[id]
	if s == nil || !r.now().Before(s.ExpiresAt) {
		return nil
	}
	return s.Proxies[proxy]
}

// Any reports whether a session is live: when none is, a request's
// session header is not even read.
func (r *Registry) Any() bool { return r != nil && len(*r.live.Load()) > 0 }

// Get returns a live session.
func (r *Registry) Get(id string) (*Session, bool) {
	s := (*r.live.Load())[id]
	if s == nil || !r.now().Before(s.ExpiresAt) {
		return nil, false
	}
	return s, true
}

// List is the live sessions, soonest to expire first.
func (r *Registry) List() []*Session {
	now := r.now()
	var out []*Session
	for _, s := range *r.live.Load() {
		if now.Before(s.ExpiresAt) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *Session) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return out
}

// Create makes a session of spec, read from body; its id is spec's, or a
// new one.
func (r *Registry) Create(ctx context.Context, spec *config.Session, body []byte) (*Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.current()
	id := string(spec.ID)
	if id == "" {
		id = newID()
	} else if s, ok := cur[id]; ok && r.now().Before(s.ExpiresAt) {
		return nil, ErrExists
	}
	if r.shared == nil && len(cur) >= MaxLive {
		return nil, ErrFull
	}
	raw, err := r.fits(cur, id, body)
	if err != nil {
		return nil, err
	}
	s, err := r.build(id, spec, raw)
	if err != nil {
		return nil, err
	}
	if r.shared != nil {
		if err := r.shared.Create(ctx, stored(s)); err != nil {
			return nil, err
		}
	}
	r.publish(cur, s)
	return s, nil
}

// Replace writes spec, read from body, over the session id if its
// revision is still revision; its expiry counts again from now.
func (r *Registry) Replace(ctx context.Context, id, revision string, spec *config.Session, body []byte) (*Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.current()
	old, ok := cur[id]
	if !ok {
		return nil, ErrNotFound
	}
	if r.shared == nil && old.Revision != revision {
		return nil, ErrRevision
	}
	raw, err := r.fits(cur, id, body)
	if err != nil {
		return nil, err
	}
	s, err := r.build(id, spec, raw)
	if err != nil {
		return nil, err
	}
	carry(old.Proxies, s.Proxies)
	if r.shared != nil {
		// The database decides: another replica may have written since.
		if err := r.shared.Replace(ctx, revision, stored(s)); err != nil {
			return nil, err
		}
	}
	r.publish(cur, s)
	return s, nil
}

// Delete ends a session.
func (r *Registry) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.current()
	if _, ok := cur[id]; !ok && r.shared == nil {
		return ErrNotFound
	}
	if r.shared != nil {
		if err := r.shared.Delete(ctx, id); err != nil {
			return err
		}
	}
	next := maps.Clone(cur)
	delete(next, id)
	r.live.Store(&next)
	return nil
}

// Recompile compiles every session again against rt, the runtime now in
// force: an overlay follows the proxy it lies on.
func (r *Registry) Recompile(rt *runtime.Runtime) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rt = rt
	// Shared: load them again, so that a session that did not fit the
	// configuration before (its proxy not here yet) does now.
	if r.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if r.syncLocked(ctx, true) {
			return
		}
	}
	next := map[string]*Session{}
	for id, s := range r.current() {
		c := *s
		c.Proxies = r.compile(s.ID, s.Spec)
		carry(s.Proxies, c.Proxies)
		next[id] = &c
	}
	r.live.Store(&next)
}

// Run ends sessions at their expiry, without a request to notice it,
// until ctx ends.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Reset(r.expire())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
	}
}

// expire removes what has expired and says how long until the next.
func (r *Registry) expire() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	cur := r.current()
	next := time.Hour
	var gone []string
	for id, s := range cur {
		if !now.Before(s.ExpiresAt) {
			gone = append(gone, id)
		} else {
			next = min(next, s.ExpiresAt.Sub(now))
		}
	}
	if len(gone) > 0 {
		m := maps.Clone(cur)
		for _, id := range gone {
			delete(m, id)
			r.log.Info("a session ended: it expired", "session", id)
		}
		r.live.Store(&m)
	}
	return next
}

func (r *Registry) current() map[string]*Session { return *r.live.Load() }

// publish puts s in force beside the others and wakes the expiry.
func (r *Registry) publish(cur map[string]*Session, s *Session) {
	next := maps.Clone(cur)
	next[s.ID] = s
	r.live.Store(&next)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Registry) build(id string, spec *config.Session, raw json.RawMessage) (*Session, error) {
	s := &Session{ID: id, Spec: spec, Raw: raw, ExpiresAt: r.now().Add(time.Duration(*spec.TTL) * time.Second)}
	s.Revision = revisionOf(spec)
	s.Proxies = map[string]*runtime.Proxy{}
	for name, o := range spec.Proxies {
		base := r.rt.Document.Proxy(string(name))
		if base == nil {
			return nil, fmt.Errorf("no proxy is named %s", name)
		}
		p, err := runtime.CompileOverlay(base, &o)
		if err != nil {
			return nil, err
		}
		if r.prepare != nil {
			r.prepare(p, id)
		}
		s.Proxies[string(name)] = p
	}
	return s, nil
}

// compile compiles a session's overlays against the runtime in force,
// leaving out those whose proxy is gone or that no longer compile.
func (r *Registry) compile(id string, spec *config.Session) map[string]*runtime.Proxy {
	out := map[string]*runtime.Proxy{}
	for name, o := range spec.Proxies {
		base := r.rt.Document.Proxy(string(name))
		if base == nil {
			r.log.Warn("a session's proxy is gone; the session no longer applies to it", "session", id, "proxy", string(name))
			continue
		}
		p, err := runtime.CompileOverlay(base, &o)
		if err != nil {
			r.log.Warn("a session's overlay no longer compiles over its proxy; the session no longer applies to it", "session", id, "proxy", string(name), "error", err.Error())
			continue
		}
		if r.prepare != nil {
			r.prepare(p, id)
		}
		out[string(name)] = p
	}
	return out
}

// carry keeps what the overlays of before counted in those of after that
// are unchanged (same revision): a change elsewhere restarts nothing.
func carry(before, after map[string]*runtime.Proxy) {
	for name, p := range after {
		if o := before[name]; o != nil && o.Revision == p.Revision {
			p.Counters.Adopt(o.Counters)
			p.Attempts = o.Attempts
		}
	}
}

// revisionOf fingerprints what a session says.
func revisionOf(spec *config.Session) string {
	c := *spec
	c.ID, c.Revision = "", ""
	b, _ := json.Marshal(struct {
		TTL     *config.SessionTTL
		Proxies map[config.ProxyName]config.SessionProxy
		Nonce   string
	}{c.TTL, c.Proxies, newID()})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// newID is 22 URL-safe characters: 128 random bits, never a leading `-`,
// which a command line (doppel sessions end ID) would take for a flag.
func newID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}
