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
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/runtime"
)

// MaxLive bounds the sessions live at once.
const MaxLive = 1000

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
	ErrNotFound = errors.New("no such session")
	ErrExists   = errors.New("a session of that id is live")
	ErrFull     = fmt.Errorf("%d sessions are live, the most there may be: end one, or let one expire", MaxLive)
	ErrRevision = errors.New("the session changed since it was read")
)

// Registry is the live sessions of this instance.
type Registry struct {
	live atomic.Pointer[map[string]*Session]
	mu   sync.Mutex // writes, expiry and recompiles
	rt   *runtime.Runtime
	log  *slog.Logger
	now  func() time.Time
	wake chan struct{}
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

// Create makes a session of spec; its id is spec's, or a new one.
func (r *Registry) Create(spec *config.Session, raw json.RawMessage) (*Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.current()
	id := string(spec.ID)
	if id == "" {
		id = newID()
	} else if _, ok := cur[id]; ok {
		return nil, ErrExists
	}
	if len(cur) >= MaxLive {
		return nil, ErrFull
	}
	s, err := r.build(id, spec, raw)
	if err != nil {
		return nil, err
	}
	r.publish(cur, s)
	return s, nil
}

// Replace writes spec over the session id if its revision is still
// revision; its expiry counts again from now.
func (r *Registry) Replace(id, revision string, spec *config.Session, raw json.RawMessage) (*Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.current()
	old, ok := cur[id]
	if !ok {
		return nil, ErrNotFound
	}
	if old.Revision != revision {
		return nil, ErrRevision
	}
	s, err := r.build(id, spec, raw)
	if err != nil {
		return nil, err
	}
	r.publish(cur, s)
	return s, nil
}

// Delete ends a session.
func (r *Registry) Delete(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.current()
	if _, ok := cur[id]; !ok {
		return ErrNotFound
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
	next := map[string]*Session{}
	for id, s := range r.current() {
		c := *s
		c.Proxies = r.compile(s.ID, s.Spec)
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
	for name, o := range spec.Proxies {
		base := r.rt.Document.Proxy(string(name))
		if base == nil {
			return nil, fmt.Errorf("no proxy is named %s", name)
		}
		if _, err := runtime.CompileOverlay(base, &o); err != nil {
			return nil, err
		}
	}
	s.Proxies = r.compile(id, spec)
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
		out[string(name)] = p
	}
	return out
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

// newID is 22 URL-safe characters: 128 random bits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
