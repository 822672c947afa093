package runtime

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
)

// Controller is the one way the configuration in force changes: a reload,
// a write through the admin API, a token added over the control socket. All
// of them hold its mutex, so they never interleave; requests never take it.
type Controller struct {
	mu     sync.Mutex
	holder *Holder
	store  store.Store
	onSwap func(old, next *Runtime)
}

// OnSwap registers what to do after every swap (metrics republish the
// mocks per proxy). It runs under the controller's lock.
func (c *Controller) OnSwap(fn func(old, next *Runtime)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onSwap = fn
}

func (c *Controller) swap(rt *Runtime) *Runtime {
	old := c.holder.Load()
	c.holder.Swap(rt)
	if c.onSwap != nil {
		c.onSwap(old, rt)
	}
	return old
}

// NewController changes what holder holds, from what st stores.
func NewController(holder *Holder, st store.Store) *Controller {
	return &Controller{holder: holder, store: st}
}

// Holder is what the controller swaps.
func (c *Controller) Holder() *Holder { return c.holder }

// Store is where the configuration lives.
func (c *Controller) Store() store.Store { return c.store }

// Reloaded is the outcome of a reload.
type Reloaded struct {
	Runtime *Runtime
	// Unapplied are the sections that changed but take effect only on a
	// restart: listeners, logging, paths.
	Unapplied []string
}

// Reload loads, checks and compiles the whole stored configuration, then
// swaps it in. Any failure leaves the running configuration untouched;
// requests in flight finish on the runtime they started with.
func (c *Controller) Reload(ctx context.Context) (*Reloaded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := c.store.Load(ctx)
	if err != nil {
		return nil, err
	}
	rt, err := Compile(snap.Document)
	if err != nil {
		return nil, err
	}
	// A store whose template files live elsewhere (a database) writes
	// them out before the configuration that names them is in force.
	if m, ok := c.store.(interface{ Materialize(context.Context) error }); ok {
		if err := m.Materialize(ctx); err != nil {
			return nil, fmt.Errorf("the template files could not be written: %w", err)
		}
	}
	old := c.swap(rt)
	return &Reloaded{Runtime: rt, Unapplied: Unapplied(old.Document, rt.Document)}, nil
}

// Unapplied lists the sections of next that differ from running and need
// a restart. admin.tokens, access, groups, public, auth and upload take
// effect at once: they are policy, read per request.
func Unapplied(running, next *config.Document) []string {
	var out []string
	if running == nil {
		return nil
	}
	if !reflect.DeepEqual(canonicalOf(running.Server), canonicalOf(next.Server)) {
		out = append(out, "server")
	}
	if running.Logging != next.Logging {
		out = append(out, "logging")
	}
	if running.Control != next.Control {
		out = append(out, "control")
	}
	if running.Templates != next.Templates {
		out = append(out, "templates")
	}
	if !reflect.DeepEqual(running.Sentry, next.Sentry) {
		out = append(out, "sentry")
	}
	a, b := running.Admin, next.Admin
	if *a.Enable != *b.Enable || *a.Dashboard != *b.Dashboard || a.Title != b.Title || a.Host != b.Host || a.Port != b.Port {
		out = append(out, "admin")
	}
	return out
}

func canonicalOf(s config.Server) string {
	ext := ""
	if s.ExternalURL != nil {
		ext = s.ExternalURL.String()
	}
	return fmt.Sprint(s.Host.String(), s.Port, ext)
}

// Conflict is a write refused because what it was based on moved.
type Conflict struct{ Reason string }

func (e *Conflict) Error() string { return e.Reason }

// NotPromoted is a write that was stored but could not be put in force.
type NotPromoted struct{ Err error }

func (e *NotPromoted) Error() string {
	return fmt.Sprintf("the configuration was stored but is not running (%v); retry with a reload", e.Err)
}

func (e *NotPromoted) Unwrap() error { return e.Err }

// maxAttempts bounds how often a write is retried when the stored
// configuration moved under it for a reason it does not care about.
const maxAttempts = 4

// Write changes the stored configuration and puts the result in force
// before it returns: edit gets a fresh copy of the stored document and
// changes it (returning an error refuses the write; *config.Invalid,
// *Conflict and others are passed through). The document is checked with
// every rule, saved with a compare-and-swap on the whole configuration,
// and retried when an unrelated writer got there first.
func (c *Controller) Write(ctx context.Context, edit func(doc *config.Document) error) (*Runtime, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range maxAttempts {
		snap, err := c.store.Load(ctx)
		if err != nil {
			return nil, err
		}
		doc := snap.Document
		if err := edit(doc); err != nil {
			return nil, err
		}
		doc.Normalize()
		if vs := config.Validate(doc); len(vs) > 0 {
			return nil, &config.Invalid{Violations: vs}
		}
		if _, err := c.store.Save(ctx, doc, snap.Revision); err != nil {
			if err == store.ErrRevisionMismatch {
				continue
			}
			return nil, err
		}
		rt, err := Compile(doc)
		if err != nil {
			return nil, &NotPromoted{Err: err}
		}
		c.swap(rt)
		return rt, nil
	}
	return nil, &Conflict{Reason: "the configuration kept changing under this write; try again"}
}
