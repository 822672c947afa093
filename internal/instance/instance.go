// Package instance is one running Doppel: its two listeners and what they
// share (the runtime holder, the journal, the sessions, the metrics), built
// from a loaded document and an open store. doppel serve runs one until a
// signal; doppeltest runs many in one test binary, so nothing here touches
// process-wide state: no flag, no environment variable, no signal, no
// GOMAXPROCS.
package instance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/doppelproxy/doppel/internal/admin"
	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/compress"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/control"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/proxy"
	"github.com/doppelproxy/doppel/internal/render"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/session"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/postgres"
	"github.com/doppelproxy/doppel/internal/tcp"
	"github.com/doppelproxy/doppel/internal/telemetry"
	"github.com/doppelproxy/doppel/internal/version"
)

// Options are what a Doppel is started with besides its document.
type Options struct {
	// Store is where changes are written; open, owned by the caller.
	Store store.Store
	// Revision is the revision the store holds the document at, when it
	// is not the document's own (one Doppel 1.1 wrote last, SPEC §19.3).
	Revision config.Revision
	// Postgres is Store when it is the database: sessions are then shared
	// with every replica.
	Postgres *postgres.Store
	// Follow keeps the configuration in force equal to the store's when
	// the store can announce changes (a database, a watched file).
	Follow bool
	// CounterTimeout is how long a counted request waits for the fleet's
	// counters before it counts on this replica (0: fault.SharedTimeout).
	CounterTimeout time.Duration
	// FleetKey signs and checks the calls that read the journal of every
	// replica (SPEC §18.1); nil: this replica reads its own only.
	FleetKey fleet.Key
	// Advertise is the admin URL the fleet's peers reach this replica at
	// (serve --advertise); empty: the admin listener's (SPEC §18.1).
	Advertise string
	// ProxyAddr and AdminAddr replace server.host:server.port and
	// admin.host:admin.port when set.
	ProxyAddr, AdminAddr string
	// ControlSocket is the control socket's path; none when empty.
	ControlSocket string
	// Serves names the configuration served, for the control socket: a
	// command naming another is refused (control.Server.Serves).
	Serves string
	// Seed makes fault rolls reproducible when set.
	Seed string
	// ExternalURL is Doppel's own address (DOPPEL_EXTERNAL_URL) when set,
	// ahead of server.external_url.
	ExternalURL string
	// ConfigPath is the configuration file's path with the file store, ""
	// with a database: server.tls.auto keeps its files beside it.
	ConfigPath string
	// StateHome is where server.tls.auto keeps its files when there is no
	// configuration file ($XDG_STATE_HOME/doppel, else
	// ~/.local/state/doppel); read by the caller, not here.
	StateHome string
	// Strict refuses a configuration with advisories (serve --strict): at
	// start it is the caller's to check; here, every reload and write.
	Strict bool
	// EnvTokens are admin tokens from outside the document.
	EnvTokens []admin.Token
	Log       *telemetry.Logger
	Reporter  *telemetry.Reporter
}

// Instance is a Doppel whose listeners are bound: connections are queued
// from Start on and served once Serve runs.
type Instance struct {
	Runtime *runtime.Holder
	Control *change.Controller
	// TCP runs the document's tcp proxies.
	TCP *tcp.Fleet
	// Fleet is this replica in its fleet: a fleet of one without the
	// database.
	Fleet *fleet.Member

	log      *telemetry.Logger
	proxies  listening
	admin    listening
	handler  *proxy.Handler
	ctlSrv   *control.Server
	stops    []func() // in the order they are undone, last first
	served   chan error
	serveRun bool
}

// Start compiles the document and binds the listeners. On an error nothing
// stays bound or running.
func Start(doc *config.Document, o Options) (_ *Instance, err error) {
	if o.Log == nil {
		o.Log = telemetry.Nop()
	}
	if o.Reporter == nil {
		o.Reporter = &telemetry.Reporter{}
	}
	rt, err := runtime.Compile(doc)
	if err != nil {
		return nil, fmt.Errorf("cannot compile the configuration: %v", err)
	}
	if o.Revision != "" {
		rt.Revision = o.Revision
	}
	i := &Instance{log: o.Log, served: make(chan error, 2)}
	defer func() {
		if err != nil {
			i.undo()
		}
	}()
	i.Runtime = runtime.NewHolder(rt)
	i.Control = change.New(i.Runtime, o.Store, o.Log)
	watchAdvisories(i.Control, o)
	metrics := newMetrics(doc, i.Control)
	jr := newJournal(i.Control)
	var overlays func(p *runtime.Proxy, session string)
	if o.Postgres != nil {
		var stopCleanup func()
		overlays, stopCleanup = shareCounters(i.Control, rt, o.Postgres, o.CounterTimeout, o.Log)
		i.stops = append(i.stops, stopCleanup)
	}
	sessions, stopSessions := newSessions(i.Control, o.Log, o.Postgres, overlays)
	i.stops = append(i.stops, stopSessions)
	stopFollowing, err := followStore(i.Control, o.Store, o.Follow)
	if err != nil {
		return nil, err
	}
	// Before the store closes: a reload under way finishes first.
	i.stops = append(i.stops, stopFollowing)
	if o.ControlSocket != "" {
		if i.ctlSrv, err = control.Listen(o.ControlSocket, i.Control, tokenNames(o.EnvTokens)); err != nil {
			return nil, err
		}
		i.ctlSrv.Serves = o.Serves
		i.stops = append(i.stops, func() { _ = i.ctlSrv.Close() })
		go i.ctlSrv.Serve()
	}
	if i.proxies, i.handler, err = listenProxy(doc, o, i.Runtime, metrics, jr, sessions); err != nil {
		return nil, err
	}
	i.stops = append(i.stops, func() { _ = i.proxies.ln.Close() })
	if i.TCP, err = startTCP(doc, o, i.Control, jr, metrics); err != nil {
		return nil, err
	}
	i.stops = append(i.stops, i.TCP.Close)
	var api *admin.Server
	if *doc.Admin.Enable {
		api = admin.New(i.Control, o.EnvTokens, o.Log, jr)
		api.Seeded = o.Seed != ""
		api.Metrics = metrics.Handler()
		api.Sessions = sessions
		api.TCPCounters = i.TCP.Counters
		api.TCPListen = i.TCP.CanListen
		if i.admin, err = listenAdmin(doc, o, api, metrics); err != nil {
			return nil, err
		}
		i.stops = append(i.stops, func() { _ = i.admin.ln.Close() })
	}
	if err := i.join(o, rt); err != nil {
		return nil, err
	}

	if api != nil {
		api.JoinFleet(i.Fleet, o.FleetKey)
	}
	// Last, as it serves at once: an upstream its clients give is checked
	// against every listener bound before it.
	stopToxiproxy, err := startToxiproxy(doc, o, jr, metrics, i.ownListeners)
	if err != nil {
		return nil, err
	}
	i.stops = append(i.stops, stopToxiproxy)
	return i, nil
}

// join makes this process a replica of its fleet (SPEC §18.1): with the
// database, its row in the registry, kept fresh until it stops; else a
// fleet of one. The revision it reports follows the configuration in force.
func (i *Instance) join(o Options, rt *runtime.Runtime) error {
	url := ""
	if i.admin.ln != nil {
		url = fleet.Advertise(o.Advertise, i.admin.ln.Addr())
	}
	self := fleet.This(url, string(rt.Revision))
	if o.Postgres == nil {
		i.Fleet = fleet.Single(self)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		defer cancel()
		m, err := fleet.Join(ctx, o.Postgres.Replicas(), self, o.Log.Logger)
		if err != nil {
			return fmt.Errorf("cannot register this replica in the database: %v", err)
		}
		i.Fleet = m
		i.stops = append(i.stops, func() {
			ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
			defer cancel()
			if err := m.Stop(ctx); err != nil {
				o.Log.Warn("cannot delete this replica's row from the registry; the others will see it lost", "replica", self.ID, "error", err)
			}
		})
	}
	i.Control.OnSwap(func(_, next *runtime.Runtime) { i.Fleet.SetRevision(string(next.Revision)) })
	return nil
}

// shareCounters makes the counters of every proxy and session overlay, and
// the attempts --seed counts, the fleet's (SPEC §18.1): kept in the
// database, each count one statement, falling back to the replica's own
// when the database does not answer in time (the log says it once an
// outage; while it lasts the database is asked once a second). A new
// configuration deletes the counters of the revisions it no longer
// serves; stop ends that cleanup.
func shareCounters(ctl *change.Controller, first *runtime.Runtime, pg *postgres.Store, timeout time.Duration, log *telemetry.Logger) (overlays func(p *runtime.Proxy, session string), stop func()) {
	breaker := fault.NewBreaker(timeout, func(down bool, err error) {
		if down {
			log.Warn("the fleet's counters did not answer in time; counting on this replica until they do", "timeout", cmp.Or(timeout, fault.SharedTimeout).String(), "error", err)
		} else {
			log.Info("the fleet's counters answer again; counting in the database")
		}
	})
	shareProxy := func(p *runtime.Proxy, session string) {
		fleet := pg.Counters(p.Name, string(p.Revision), session, p.Counters.Max())
		p.Counters.Share(fleet, breaker)
		// The attempts --seed counts; those of an unchanged proxy are
		// carried over, shared already.
		if !p.Attempts.Shared() {
			p.Attempts.Share(fleet, breaker)
		}
	}
	share := func(rt *runtime.Runtime) {
		for _, p := range rt.Proxies {
			shareProxy(p, "")
		}
	}
	share(first)
	ctl.Prepare(share)
	// One goroutine deletes what the configurations no longer serve, the
	// newest configuration's always, so that a slow cleanup of an older
	// one never deletes what a newer one serves.
	newest := make(chan map[string]string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case serving := <-newest:
				keep, stop := context.WithTimeout(ctx, 10*time.Second)
				if err := pg.KeepCounters(keep, serving); err != nil && ctx.Err() == nil {
					log.Warn("cannot delete the counters of the revisions no longer served; they stay until the next change", "error", err)
				}
				stop()
			}
		}
	}()
	ctl.OnSwap(func(_, next *runtime.Runtime) {
		serving := make(map[string]string, len(next.Proxies))
		for _, p := range next.Proxies {
			serving[p.Name] = string(p.Revision)
		}
		select { // only the newest waits
		case <-newest:
		default:
		}
		newest <- serving
	})
	return shareProxy, func() { cancel(); <-done }
}

// joinTimeout bounds the registry's first write; leaveTimeout its last
// delete, which a shutdown waits for (a database gone costs 2 s, then the
// row goes lost by itself).
const (
	joinTimeout  = 5 * time.Second
	leaveTimeout = 2 * time.Second
)

// watchAdvisories says what a change brings that is legal but worth saying
// (each advisory once, when it first appears), and with Strict refuses a
// change that has any. A template file not uploaded yet is refused only at
// start: a mock must name its file before the file can be uploaded.
func watchAdvisories(ctl *change.Controller, o Options) {
	if o.Strict {
		ctl.Check(func(_ context.Context, next *config.Document) []config.Violation {
			var vs []config.Violation
			for _, a := range config.Advisories(next) {
				vs = append(vs, a.Violation())
			}
			return vs
		})
		return
	}
	// What the configuration in force advises, kept from one swap to the
	// next (OnSwap runs under the controller's lock).
	var said map[string]bool
	ctl.OnSwap(func(old, next *runtime.Runtime) {
		if old == nil {
			return
		}
		if said == nil {
			said = map[string]bool{}
			for _, a := range config.Advisories(old.Document) {
				said[a.String()] = true
			}
		}
		now := map[string]bool{}
		for _, a := range config.Advisories(next.Document) {
			now[a.String()] = true
			if !said[a.String()] {
				o.Log.Warn(a.Message, "path", a.Path, "revision", string(next.Revision))
			}
		}
		said = now
	})
}

// ProxyAddr is the proxy listener's bound address.
func (i *Instance) ProxyAddr() net.Addr { return i.proxies.ln.Addr() }

// AdminAddr is the admin listener's bound address; nil with admin.enable
// false.
func (i *Instance) AdminAddr() net.Addr {
	if i.admin.ln == nil {
		return nil
	}
	return i.admin.ln.Addr()
}

// Serve serves both listeners until Shutdown. The channel answers when a
// listener stopped by itself: what stopped it.
func (i *Instance) Serve() <-chan error {
	if i.serveRun {
		return i.served
	}
	i.serveRun = true
	for _, l := range []listening{i.proxies, i.admin} {
		if l.srv != nil {
			go func() {
				if err := l.srv.Serve(l.ln); !errors.Is(err, http.ErrServerClosed) {
					i.served <- err
				}
			}()
		}
	}
	return i.served
}

// Shutdown stops accepting connections and lets in-flight requests finish
// until ctx ends, then cuts what is left; everything Start started is
// stopped when it returns. It reports whether the requests finished in
// time.
func (i *Instance) Shutdown(ctx context.Context) error {
	defer i.undo()
	if i.admin.srv != nil {
		go func() { _ = i.admin.srv.Shutdown(ctx) }()
	}
	i.handler.Stopping() // parked answers say Connection: close from now on
	err := i.proxies.srv.Shutdown(ctx)
	if err != nil {
		_ = i.proxies.srv.Close()
	}
	// Hanging requests hold connections the server handed over: they end
	// now, each recorded before the log is flushed.
	i.handler.EndHangs()
	// Delayed answers waiting off the server finish, or go out at once
	// when the drain time is over.
	i.handler.EndParked(ctx)
	if i.admin.srv != nil {
		_ = i.admin.srv.Close()
	}
	return err
}

func (i *Instance) undo() {
	for k := len(i.stops) - 1; k >= 0; k-- {
		i.stops[k]()
	}
	i.stops = nil
}

// followStore keeps the configuration in force equal to the store's when on:
// the database announces every replica's writes; the file is followed
// when asked (--watch). stop ends it and waits for a reload under way.
func followStore(ctl *change.Controller, st store.Store, on bool) (stop func(), err error) {
	w, ok := st.(store.Watcher)
	if !ok || !on {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := ctl.Follow(ctx, w)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cannot watch %s: %v", w.Describe(), err)
	}
	return func() { cancel(); <-stopped }, nil
}

// newMetrics makes the metrics and keeps doppel_proxy_mocks current. Each
// instance has a registry of its own.
func newMetrics(doc *config.Document, ctl *change.Controller) *telemetry.Metrics {
	metrics := telemetry.NewMetrics(version.Version, *doc.Admin.Dashboard)
	publishMocks(metrics, nil, ctl.Runtime())
	ctl.OnSwap(func(old, next *runtime.Runtime) { publishMocks(metrics, old, next) })
	return metrics
}

// newJournal makes the request journal, which outlives the runtime: a
// reload resizes it when journal.size changes.
func newJournal(ctl *change.Controller) *journal.Journal {
	jr := journal.New(ctl.Runtime().Document)
	ctl.OnSwap(func(_, next *runtime.Runtime) { jr.Configure(next.Document) })
	return jr
}

// newSessions makes the live sessions, compiled again whenever the
// configuration changes and ended at their expiry until stop is called.
// With PostgreSQL they live in the database, and every replica's write
// reaches this one through LISTEN (caught up after every connect).
func newSessions(ctl *change.Controller, logger *telemetry.Logger, pg *postgres.Store, overlays func(p *runtime.Proxy, session string)) (reg *session.Registry, stop func()) {
	reg = session.New(ctl.Runtime(), logger.Logger)
	if overlays != nil {
		reg.Prepare(overlays)
	}
	ctl.OnSwap(func(_, next *runtime.Runtime) { reg.Recompile(next) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reg.Run(ctx) }()
	none := make(chan struct{})
	close(none)
	var watched <-chan struct{} = none
	if pg != nil {
		reg.Share(pg.Sessions())
		watched = pg.Sessions().Watch(ctx, logger.Logger, func() bool { return reg.Sync(ctx) })
	}
	return reg, func() { cancel(); <-done; <-watched }
}

// publishMocks republishes doppel_proxy_mocks for the runtime now in force;
// a proxy that left goes to 0.
func publishMocks(m *telemetry.Metrics, old, next *runtime.Runtime) {
	counts := map[string]int{}
	for _, p := range next.Proxies {
		counts[p.Name] = len(p.Mocks)
	}
	var gone []string
	if old != nil {
		for _, p := range old.Proxies {
			if _, ok := counts[p.Name]; !ok {
				gone = append(gone, p.Name)
			}
		}
	}
	m.PublishMocks(counts, gone)
}

// externalAddress settles Doppel's own address (SPEC §8.3): the
// environment's, else server.external_url, else the listener's address
// with a wildcard bind read as loopback.
func externalAddress(doc *config.Document, fromEnv, scheme, addr string, bound net.Addr) (*proxy.External, string, error) {
	raw, source := "", ""
	if fromEnv != "" {
		e, err := config.ParseExternalURL(fromEnv)
		if err != nil {
			return nil, "", fmt.Errorf("DOPPEL_EXTERNAL_URL: %v", err)
		}
		raw, source = e.String(), "DOPPEL_EXTERNAL_URL"
	} else if doc.Server.ExternalURL != nil {
		raw, source = doc.Server.ExternalURL.String(), "server.external_url"
	}
	if raw == "" {
		host, _, _ := net.SplitHostPort(addr)
		_, port, _ := net.SplitHostPort(bound.String())
		return proxy.ListenerExternal(scheme, net.JoinHostPort(host, port)), "the proxy listener", nil
	}
	e, err := proxy.NewExternal(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", source, err)
	}
	return e, source, nil
}

// externalMessage is the startup line naming the address redirects and
// bodies naming an upstream are rewritten to, worded as Doppel 1.1 words
// it for the sources it has.
func externalMessage(source string) string {
	switch source {
	case "DOPPEL_EXTERNAL_URL":
		return "external url from the environment"
	case "the proxy listener":
		return "external url from server.host and server.port"
	}
	return "external url from " + source
}

// tokenDigests are the environment's tokens as the proxy listener looks
// for them: by digest, to the token's name.
func tokenDigests(tokens []admin.Token) map[config.TokenDigest]string {
	out := make(map[config.TokenDigest]string, len(tokens))
	for _, t := range tokens {
		out[config.DigestOf(string(t.Value))] = string(t.Name)
	}
	return out
}

func tokenNames(tokens []admin.Token) []config.Name {
	var names []config.Name
	for _, t := range tokens {
		names = append(names, t.Name)
	}
	return names
}

// listenProxy binds the proxy listener and builds its server.
func listenProxy(doc *config.Document, o Options, holder *runtime.Holder, metrics *telemetry.Metrics,
	jr *journal.Journal, sessions *session.Registry) (listening, *proxy.Handler, error) {
	addr := cmp.Or(o.ProxyAddr, net.JoinHostPort(doc.Server.Host.String(), strconv.Itoa(int(doc.Server.Port))))
	// The certificate before the bind: a bad one binds nothing.
	cert, err := listenerCertificate(doc, o, addr)
	if err != nil {
		return listening{}, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if cert != nil {
			_ = cert.Close()
		}
		setting, other := "server.host and server.port", "server.port (or --proxy-addr)"
		if o.ProxyAddr != "" {
			setting, other = "--proxy-addr or DOPPEL_PROXY_ADDR", "--proxy-addr"
		}
		return listening{}, nil, bindError("the proxy listener", addr, setting, other, err)
	}
	scheme := "http"
	if cert != nil {
		// TLS beneath proxy.Listener, whose wrapper then sees what the
		// server writes in the clear. The server is handed no *tls.Conn,
		// so HTTP/2 negotiated by ALPN arrives as HTTP/2 with prior
		// knowledge (the Protocols below serve it) and requests have no
		// TLS state: Options.TLS says https instead. Closing the listener
		// stops the certificate's watching.
		ln, scheme = cert.Listen(ln), "https"
	}
	external, source, err := externalAddress(doc, o.ExternalURL, scheme, addr, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return listening{}, nil, err
	}
	var roller fault.Roller
	if o.Seed != "" {
		roller = fault.NewSeeded(o.Seed)
		o.Log.Info("fault rolls are seeded: a request replayed with the same X-Request-ID gets the same faults, and each retry of it a roll of its own")
	}
	o.Log.Info(externalMessage(source), "external_url", external.String(), "source", source)
	handler := proxy.New(holder, proxy.Options{
		Roller:    roller,
		Log:       o.Log,
		Templates: render.NewFiles(string(doc.Templates.Dir)),
		External:  external,
		Metrics:   metrics,
		Reporter:  o.Reporter,
		// The document's tokens are the runtime's, current after a reload.
		AdminTokens: tokenDigests(o.EnvTokens),
		Journal:     jr,
		Sessions:    sessions,
		TLS:         cert != nil,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       2 * time.Minute,
		// `OPTIONS *` is a request like any other: it resolves, and is
		// refused as a path that is not one.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     log.New(io.Discard, "", 0),
		// HTTP/1.1, HTTP/2 over TLS, and cleartext HTTP/2 with prior
		// knowledge (h2c): what gRPC clients speak without TLS, and how
		// HTTP/2 over server.tls reaches the server (above).
		Protocols: new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	handler.ResumeOn(srv)
	return listening{proxy.Listener(ln), srv}, handler, nil
}

// listenAdmin binds the admin listener and builds its server.
func listenAdmin(doc *config.Document, o Options, api *admin.Server, metrics *telemetry.Metrics) (listening, error) {
	addr := cmp.Or(o.AdminAddr, net.JoinHostPort(doc.Admin.Host.String(), strconv.Itoa(int(doc.Admin.Port))))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		setting, other := "admin.host and admin.port", "admin.port (or --admin-addr)"
		if o.AdminAddr != "" {
			setting, other = "--admin-addr or DOPPEL_ADMIN_ADDR", "--admin-addr"
		}
		return listening{}, bindError("the admin listener", addr, setting, other, err)
	}
	srv := &http.Server{
		Handler:           metrics.InstrumentAdmin(compress.Handler(api), api.Route),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	o.Log.Info("the admin API is listening", "admin_addr", ln.Addr().String())
	// Where a person goes next.
	base := "http://" + Browsable(ln.Addr()) + "/"
	how := "admin actions need a token: one of admin.tokens, DOPPEL_ADMIN_TOKENS, or doppel token add --name NAME --group admin"
	if o.ConfigPath != "" {
		how += " --config " + o.ConfigPath
	}
	if *doc.Admin.Dashboard {
		o.Log.Info("open the dashboard in a browser; "+how, "url", base, "api", base+"swagger-ui/")
	} else {
		o.Log.Info("the admin API is described at its Swagger UI; "+how, "url", base+"swagger-ui/")
	}
	return listening{ln, srv}, nil
}

// Browsable is a bound address as a browser on this machine reaches it: a
// wildcard bind is reached through loopback.
func Browsable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// listening is a bound listener and the server for it; both nil when the
// listener is off.
type listening struct {
	ln  net.Listener
	srv *http.Server
}
