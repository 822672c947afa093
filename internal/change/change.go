// Package change owns every change to the configuration in force: a
// reload, a write through the admin API or the control socket, a template
// file uploaded or deleted, the template files that follow a rename or a
// deletion, and following the store when it changes behind this process.
// All of them hold one mutex, so they never interleave; requests never take
// it. The request path reads what this package swaps in, through
// runtime.Holder, and never imports this package or a store.
package change

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// Controller changes what a Holder holds, from what a Store stores.
type Controller struct {
	mu      sync.Mutex
	holder  *runtime.Holder
	store   store.Store
	log     *telemetry.Logger
	onSwap  []func(old, next *runtime.Runtime)
	prepare []func(rt *runtime.Runtime)
	checks  []func(ctx context.Context, next *config.Document) []config.Violation
}

// New makes the controller of holder over st; log receives what goes
// wrong with template files after a write that succeeded, and what
// following the store does (nothing is logged when nil).
func New(holder *runtime.Holder, st store.Store, log *telemetry.Logger) *Controller {
	if log == nil {
		log = telemetry.Nop()
	}
	return &Controller{holder: holder, store: st, log: log}
}

// Runtime is the configuration in force.
func (c *Controller) Runtime() *runtime.Runtime { return c.holder.Load() }

// OnSwap adds what to do after every swap (metrics republish the mocks
// per proxy, the journal takes its settings), in the order added. It runs
// under the controller's lock.
func (c *Controller) OnSwap(fn func(old, next *runtime.Runtime)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onSwap = append(c.onSwap, fn)
}

// Prepare adds what a runtime is given before it is put in force (the
// fleet's counters), under the controller's lock, before any request
// reads it.
func (c *Controller) Prepare(fn func(rt *runtime.Runtime)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prepare = append(c.prepare, fn)
}

// Check adds a rule that a configuration must pass to be put in force
// besides the document's own: what only the running process can tell (a
// tcp listen address another process holds), or serve --strict's
// advisories. A reload or a write that breaks one changes nothing and
// fails with *config.Invalid. It runs under the controller's lock.
func (c *Controller) Check(fn func(ctx context.Context, next *config.Document) []config.Violation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, fn)
}

// checked runs the rules Check added; the caller holds the lock.
func (c *Controller) checked(ctx context.Context, doc *config.Document) error {
	var vs []config.Violation
	for _, fn := range c.checks {
		vs = append(vs, fn(ctx, doc)...)
	}
	if len(vs) > 0 {
		return &config.Invalid{Violations: vs}
	}
	return nil
}

// swap puts rt in force; the caller holds the lock. What the proxies
// carry from one configuration to the next (their attempt counts) passes
// to the new runtime before anyone can see it.
func (c *Controller) swap(rt *runtime.Runtime) *runtime.Runtime {
	old := c.holder.Load()
	rt.Inherit(old)
	for _, fn := range c.prepare {
		fn(rt)
	}
	c.holder.Swap(rt)
	for _, fn := range c.onSwap {
		fn(old, rt)
	}
	return old
}

// Reloaded is the outcome of a reload.
type Reloaded struct {
	Runtime *runtime.Runtime
	// Unapplied are the sections that changed but take effect only on a
	// restart: listeners, logging, paths.
	Unapplied []string
}

// Reload loads, checks and compiles the whole stored configuration, then
// swaps it in. Any failure leaves the running configuration untouched;
// requests in flight finish on the runtime they started with.
func (c *Controller) Reload(ctx context.Context) (*Reloaded, error) {
	res, err := c.reload(ctx)
	if err == nil {
		c.logReloaded(res)
	}
	return res, err
}

// logReloaded says a reload is in force, and which of its changes wait
// for a restart, in Doppel 1.1's words; more says where it came from.
func (c *Controller) logReloaded(res *Reloaded, more ...any) {
	proxies, tcp := res.Runtime.ProxyCount()
	c.log.Info("config reloaded", append([]any{"revision", string(res.Runtime.Revision), "proxies", proxies, "tcp_proxies", tcp}, more...)...)
	if len(res.Unapplied) > 0 {
		c.log.Warn("reload accepted changes to sections that only take effect on restart", "sections", res.Unapplied)
	}
}

func (c *Controller) reload(ctx context.Context) (*Reloaded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := c.store.Load(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.checked(ctx, snap.Document); err != nil {
		return nil, err
	}
	rt, err := runtime.Compile(snap.Document)
	if err != nil {
		return nil, err
	}
	// The revision the store holds, which every compare-and-swap uses: 1.1's
	// for a document Doppel 1.1 wrote last (SPEC §19.3), else the document's.
	rt.Revision = snap.Revision
	// A store whose template files live elsewhere (a database) writes
	// them out before the configuration that names them is in force.
	if m, ok := c.store.(store.Materializer); ok {
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
	if !reflect.DeepEqual(running.Toxiproxy, next.Toxiproxy) {
		out = append(out, "toxiproxy")
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
	tls := ""
	if s.TLS != nil {
		// The files' contents are read again by themselves; which files,
		// or auto, are the listener's at start.
		tls = fmt.Sprintf("%+v", *s.TLS)
	}
	return fmt.Sprint(s.Host.String(), s.Port, ext, tls)
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

// Move says that a write renames proxy From to To: its template files
// follow it.
type Move struct{ From, To string }

// Write changes the stored configuration and puts the result in force
// before it returns: edit gets a fresh copy of the stored document and
// changes it (returning an error refuses the write; *config.Invalid,
// *Conflict and others are passed through). The document is checked with
// every rule, saved with a compare-and-swap on the whole configuration,
// and retried when an unrelated writer got there first.
//
// Template files follow, under the same lock: a renamed proxy's (moves)
// go with it, a deleted proxy's are removed, a created proxy's directory
// is cleared, and every proxy loses the files none of its mocks names. A
// failure there is logged: the configuration is already in force.
func (c *Controller) Write(ctx context.Context, edit func(doc *config.Document) error, moves ...Move) (*runtime.Runtime, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range maxAttempts {
		snap, err := c.store.Load(ctx)
		if err != nil {
			return nil, err
		}
		before := proxiesOf(snap.Document)
		doc := snap.Document
		if err := edit(doc); err != nil {
			return nil, err
		}
		doc.Normalize()
		if vs := config.Validate(doc); len(vs) > 0 {
			return nil, &config.Invalid{Violations: vs}
		}
		if err := c.checked(ctx, doc); err != nil {
			return nil, err
		}
		if _, err := c.store.Save(ctx, doc, snap.Revision); err != nil {
			if errors.Is(err, store.ErrRevisionMismatch) {
				continue
			}
			return nil, err
		}
		rt, err := runtime.Compile(doc)
		if err != nil {
			return nil, &NotPromoted{Err: err}
		}
		c.swap(rt)
		// The configuration is in force: its files follow even when the
		// caller stops waiting.
		c.followTemplates(context.WithoutCancel(ctx), before, rt, moves)
		return rt, nil
	}
	return nil, &Conflict{Reason: "the configuration kept changing under this write; try again"}
}

// proxiesOf is the names of the document's proxies, before an edit
// changes the document in place.
func proxiesOf(doc *config.Document) map[string]bool {
	out := make(map[string]bool, len(doc.Proxies))
	for i := range doc.Proxies {
		out[string(doc.Proxies[i].Name)] = true
	}
	return out
}

// followTemplates moves, removes and prunes template files after a write,
// so that the template directory is what the document says: a renamed
// proxy's files (moves) go with it, a deleted proxy's are removed, a proxy
// the write created starts with none (whatever was left under its name),
// and every other proxy keeps only the files its mocks name.
func (c *Controller) followTemplates(ctx context.Context, before map[string]bool, rt *runtime.Runtime, moves []Move) {
	moved, arrived := map[string]bool{}, map[string]bool{}
	for _, m := range moves {
		moved[m.From], arrived[m.To] = true, true
		if err := c.store.MoveTemplates(ctx, m.From, m.To); err != nil {
			c.log.Error("moving template files after a rename failed", "from", m.From, "to", m.To, "error", err.Error())
		}
	}
	for name := range before {
		if moved[name] || rt.Document.Proxy(name) != nil {
			continue
		}
		if err := c.store.DeleteTemplates(ctx, name); err != nil {
			c.log.Error("removing a deleted proxy's template files failed", "proxy", name, "error", err.Error())
		}
	}
	for _, p := range rt.Proxies {
		if _, existed := before[p.Name]; !existed && !arrived[p.Name] {
			if err := c.store.DeleteTemplates(ctx, p.Name); err != nil {
				c.log.Error("clearing a new proxy's template directory failed", "proxy", p.Name, "error", err.Error())
			}
			continue
		}
		c.prune(ctx, p.Config)
	}
}

// prune removes the proxy's template files no mock names.
func (c *Controller) prune(ctx context.Context, p *config.Proxy) {
	if err := c.store.KeepTemplates(ctx, string(p.Name), p.Declares); err != nil {
		c.log.Error("removing unused template files failed", "proxy", string(p.Name), "error", err.Error())
	}
}

// Templates lists a proxy's template files.
func (c *Controller) Templates(ctx context.Context, proxy string) ([]store.TemplateFile, error) {
	return c.store.Templates(ctx, proxy)
}

// Refusals of a template upload by the configuration in force.
var (
	ErrNoSuchProxy = errors.New("no such proxy")
	ErrNotDeclared = errors.New("no mock of the proxy names the file")
)

// WriteTemplate stores a template file, replacing one of that name; the
// next request of a mock naming it reads it. Under the lock, the proxy
// must exist and one of its mocks name the file (ErrNoSuchProxy,
// ErrNotDeclared): an upload that raced a rename or an edit dropping the
// mock leaves no file nothing would prune.
func (c *Controller) WriteTemplate(ctx context.Context, proxy, name string, content []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.holder.Load().Document.Proxy(proxy)
	switch {
	case p == nil:
		return fmt.Errorf("proxy %s: %w", proxy, ErrNoSuchProxy)
	case !p.Declares(name):
		return fmt.Errorf("proxy %s, file %s: %w", proxy, name, ErrNotDeclared)
	}
	return c.store.WriteTemplate(ctx, proxy, name, content)
}

// DeleteTemplate removes a template file; a missing one is
// store.ErrNotFound.
func (c *Controller) DeleteTemplate(ctx context.Context, proxy, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store.DeleteTemplate(ctx, proxy, name)
}
