package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doppelproxy/doppel/internal/admin"
	"github.com/doppelproxy/doppel/internal/change"
	"github.com/doppelproxy/doppel/internal/compress"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/control"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/journal"
	"github.com/doppelproxy/doppel/internal/proxy"
	"github.com/doppelproxy/doppel/internal/render"
	"github.com/doppelproxy/doppel/internal/runtime"
	"github.com/doppelproxy/doppel/internal/session"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/file"
	"github.com/doppelproxy/doppel/internal/store/postgres"
	"github.com/doppelproxy/doppel/internal/telemetry"
	"github.com/doppelproxy/doppel/internal/version"
	"github.com/spf13/cobra"
)

// Environment variables of serve's own flags.
const (
	envWorkers     = "DOPPEL_WORKERS"
	envProxyAddr   = "DOPPEL_PROXY_ADDR"
	envAdminAddr   = "DOPPEL_ADMIN_ADDR"
	envExternalURL = "DOPPEL_EXTERNAL_URL"
	envSeed        = "DOPPEL_SEED"
)

// drainTimeout bounds how long in-flight requests get after a signal.
const drainTimeout = 30 * time.Second

type serveFlags struct {
	store     storeFlags
	workers   int
	budget    int64 // DOPPEL_RENDER_BUDGET; 0 for the default
	proxyAddr string
	adminAddr string
	socket    string
	seed      string
	watch     bool
}

func newServeCmd(stdout io.Writer) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use: "serve",
		Example: `  doppel serve --config examples/main.yaml
  doppel serve --config main.yaml --watch --seed "$CI_PIPELINE_ID"
  doppel serve --store postgres --database-url postgres://doppel@db/doppel --proxy-addr 127.0.0.1:0`,
		Short: "Run the proxy listener until SIGINT or SIGTERM",
		Long: `Load and validate the configuration, then serve it until SIGINT or SIGTERM.

On the first signal Doppel stops accepting connections, lets in-flight
requests finish (for up to 30 seconds) and exits 0; a second signal exits at
once. A configuration with violations is refused with every one listed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd, &f, stdout)
		},
	}
	f.store.register(cmd)
	fs := cmd.Flags()
	fs.IntVar(&f.workers, "workers", 0, "how many OS threads run Go code at once, GOMAXPROCS (env "+envWorkers+"; default: every core)")
	fs.StringVar(&f.proxyAddr, "proxy-addr", "", "HOST:PORT for the proxy listener instead of server.host:server.port (env "+envProxyAddr+")")
	fs.StringVar(&f.adminAddr, "admin-addr", "", "HOST:PORT for the admin listener instead of admin.host:admin.port (env "+envAdminAddr+")")
	fs.StringVar(&f.socket, "socket", "", "the control socket instead of control.socket")
	fs.StringVar(&f.seed, "seed", "", "make every fault roll a function of this seed, the request's X-Request-ID and the attempt: a retry with the same id is rolled anew (env "+envSeed+")")
	fs.BoolVar(&f.watch, "watch", false, "with the file store, reload by itself when the document changes")
	return cmd
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
		return nil, failed("cannot watch %s: %v", w.Describe(), err)
	}
	return func() { cancel(); <-stopped }, nil
}

// newMetrics makes the metrics and keeps doppel_proxy_mocks current.
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
func newSessions(ctl *change.Controller, logger *telemetry.Logger, pg *postgres.Store) (reg *session.Registry, stop func()) {
	reg = session.New(ctl.Runtime(), logger.Logger)
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
// environment, else server.external_url, else the listener's address with
// a wildcard bind read as loopback.
func externalAddress(doc *config.Document, addr string, bound net.Addr) (*proxy.External, string, error) {
	raw, source := "", ""
	if v := strings.TrimSpace(os.Getenv(envExternalURL)); v != "" {
		e, err := config.ParseExternalURL(v)
		if err != nil {
			return nil, "", failed("%s: %v", envExternalURL, err)
		}
		raw, source = e.String(), envExternalURL
	} else if doc.Server.ExternalURL != nil {
		raw, source = doc.Server.ExternalURL.String(), "server.external_url"
	}
	if raw == "" {
		host, _, _ := net.SplitHostPort(addr)
		_, port, _ := net.SplitHostPort(bound.String())
		return proxy.ListenerExternal(net.JoinHostPort(host, port)), "the proxy listener", nil
	}
	e, err := proxy.NewExternal(raw)
	if err != nil {
		return nil, "", failed("%s: %v", source, err)
	}
	return e, source, nil
}

// limitProcess sets what the process may use: its threads, its soft
// memory limit and the rendering budget (limitMemory).
func (f *serveFlags) limitProcess() (memoryLimit, renderBudget int64) {
	goruntime.GOMAXPROCS(f.workers)
	return limitMemory(f.budget)
}

// resolve applies the environment to serve's own flags and checks them.
func (f *serveFlags) resolve(cmd *cobra.Command, kind store.Kind) error {
	if f.watch && kind != store.KindFile {
		return usage("--watch is for the file store; with --store postgres every replica follows changes by itself")
	}
	if !cmd.Flags().Changed("seed") {
		f.seed = os.Getenv(envSeed)
	}
	if !cmd.Flags().Changed("workers") {
		if v := strings.TrimSpace(os.Getenv(envWorkers)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return usage("%s must be a whole number of at least 1, not %q", envWorkers, v)
			}
			f.workers = n
		} else {
			f.workers = goruntime.NumCPU()
		}
	}
	var err error
	if f.budget, err = renderBudgetFromEnv(); err != nil {
		return err
	}
	if f.workers < 1 {
		return usage("--workers must be at least 1, not %d", f.workers)
	}
	for _, a := range []struct {
		flag, env string
		value     *string
	}{{"proxy-addr", envProxyAddr, &f.proxyAddr}, {"admin-addr", envAdminAddr, &f.adminAddr}} {
		if !cmd.Flags().Changed(a.flag) {
			*a.value = strings.TrimSpace(os.Getenv(a.env))
		}
		if *a.value != "" {
			if _, _, err := net.SplitHostPort(*a.value); err != nil {
				return usage("--%s (or %s) must be HOST:PORT: %v", a.flag, a.env, err)
			}
		}
	}
	return nil
}

func serve(cmd *cobra.Command, f *serveFlags, stdout io.Writer) error {
	opts, err := f.store.options(cmd)
	if err != nil {
		return err
	}
	if err := f.resolve(cmd, opts.Kind); err != nil {
		return err
	}
	memoryLimit, renderBudget := f.limitProcess()
	doc, pg, err := loadDocument(opts)
	if err != nil {
		return err
	}
	if pg != nil {
		defer pg.Close() // also when startup fails before the store is open; closing twice is harmless
	}
	logger, reporter, err := startTelemetry(doc, stdout)
	if err != nil {
		return err
	}
	defer logger.Flush()
	defer reporter.Flush()
	envTokens, err := startupChecks(doc, logger)
	if err != nil {
		return err
	}
	st, err := openStore(opts, doc, pg)
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := runtime.Compile(doc)
	if err != nil {
		return failed("cannot compile the configuration: %v", err)
	}
	holder := runtime.NewHolder(rt)
	ctl := change.New(holder, st, logger)
	metrics := newMetrics(doc, ctl)
	jr := newJournal(ctl)
	sessions, stopSessions := newSessions(ctl, logger, pg)
	defer stopSessions()

	stopFollowing, err := followStore(ctl, st, opts.Kind == store.KindPostgres || f.watch)
	if err != nil {
		return err
	}
	// Before the store closes: a reload under way finishes first.
	defer stopFollowing()
	ctlSrv, err := control.Listen(cmp.Or(f.socket, string(doc.Control.Socket)), ctl, tokenNames(envTokens))
	if err != nil {
		return failed("%v", err)
	}
	defer ctlSrv.Close()
	go ctlSrv.Serve()

	// Signals are ours before anyone can see the listener: a SIGTERM sent
	// the moment the startup line appears is a graceful shutdown.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	proxies, err := listenProxy(f, doc, holder, envTokens, logger, metrics, reporter, jr, sessions)
	if err != nil {
		return err
	}
	var admins listening
	if *doc.Admin.Enable {
		api := admin.New(ctl, envTokens, logger, jr)
		api.Seeded = f.seed != ""
		api.Metrics = metrics.Handler()
		api.Sessions = sessions
		if admins, err = listenAdmin(f, doc, api, metrics, logger); err != nil {
			_ = proxies.ln.Close()
			return err
		}
	}
	logger.Info("doppel is serving", "version", version.Version, "proxy_addr", proxies.ln.Addr().String(),
		"revision", string(rt.Revision), "proxies", len(rt.Proxies), "workers", f.workers,
		"memory_limit", memoryLimit, "render_budget", renderBudget)
	return serveUntilSignal(logger, signals, proxies, admins)
}

// loadDocument reads and checks the stored document: serve refuses one
// with violations, listing every one. A database is checked to be
// migrated first, and stays open for the store.
func loadDocument(opts store.Options) (*config.Document, *postgres.Store, error) {
	var pg *postgres.Store
	var src []byte
	var err error
	if opts.Kind == store.KindPostgres {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if pg, err = openDatabase(ctx, opts.DatabaseURL, opts.ConfigName); err != nil {
			return nil, nil, err
		}
		if err = postgres.CheckMigrated(ctx, pg.Pool()); err == nil {
			src, err = pg.Source(ctx)
		}
		if err != nil {
			pg.Close()
			return nil, nil, failed("%v", err)
		}
	} else if src, err = readDocument(opts); err != nil {
		return nil, nil, err
	}
	doc, err := config.Load(src)
	if err != nil {
		if pg != nil {
			pg.Close()
		}
		var inv *config.Invalid
		if errors.As(err, &inv) {
			return nil, nil, failed("the configuration is invalid:\n%s", strings.Join(inv.Lines(), "\n"))
		}
		return nil, nil, failed("%v", err)
	}
	return doc, pg, nil
}

// startTelemetry starts the log and the error reporting the document asks
// for.
func startTelemetry(doc *config.Document, stdout io.Writer) (*telemetry.Logger, *telemetry.Reporter, error) {
	logger := telemetry.NewLogger(stdout, string(doc.Logging.Level), string(doc.Logging.Format))
	if v := strings.TrimSpace(os.Getenv(telemetry.EnvLog)); v != "" {
		if _, ok := telemetry.ParseLevel(v); !ok {
			logger.Warn(telemetry.EnvLog+" is not a level (trace, debug, info, warn, error); logging.level applies", "value", v)
		}
	}
	docDSN := ""
	if doc.Sentry != nil {
		docDSN = doc.Sentry.DSN
	}
	dsn, dsnSource := telemetry.SentryDSN(docDSN)
	reporter, err := telemetry.NewReporter(dsn, version.Version)
	if err != nil {
		logger.Flush()
		return nil, nil, failed("%v", err)
	}
	if reporter.Enabled() {
		logger.Info("errors are reported to Sentry", "dsn", telemetry.MaskDSN(dsn), "source", dsnSource)
	}
	return logger, reporter, nil
}

// startupChecks logs the advisories and reads the environment's tokens,
// warning of those that shadow stored ones.
func startupChecks(doc *config.Document, logger *telemetry.Logger) ([]admin.Token, error) {
	for _, a := range config.Advisories(doc) {
		logger.Warn(a.Message, "path", a.Path)
	}
	envTokens, err := admin.ParseEnvTokens(os.Getenv(admin.EnvTokens))
	if err != nil {
		return nil, failed("%v", err)
	}
	for _, t := range doc.Admin.Tokens {
		for _, e := range envTokens {
			if e.Name == t.Name {
				logger.Warn("a configured token is shadowed by "+admin.EnvTokens+" and stops working", "token", string(t.Name))
			}
		}
	}
	return envTokens, nil
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

// openStore creates the template directory and opens the store the
// document came from (pg, when it is the database, already open), for the
// changes to come. A database's template files are written out before
// anything serves.
func openStore(opts store.Options, doc *config.Document, pg *postgres.Store) (store.Store, error) {
	dir := string(doc.Templates.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, failed("cannot create the template directory: %v", err)
	}
	if pg == nil {
		st, err := file.Open(opts.ConfigPath, dir)
		if err != nil {
			return nil, failed("cannot open the configuration store: %v", err)
		}
		return st, nil
	}
	pg.SetTemplates(dir)
	if err := pg.Materialize(context.Background()); err != nil {
		return nil, failed("cannot write the template files: %v", err)
	}
	return pg, nil
}

// listenProxy binds the proxy listener and builds its server.
func listenProxy(f *serveFlags, doc *config.Document, holder *runtime.Holder, envTokens []admin.Token,
	logger *telemetry.Logger, metrics *telemetry.Metrics, reporter *telemetry.Reporter, jr *journal.Journal, sessions *session.Registry) (listening, error) {
	addr := cmp.Or(f.proxyAddr, net.JoinHostPort(doc.Server.Host.String(), strconv.Itoa(int(doc.Server.Port))))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return listening{}, failed("the proxy listener cannot bind %s: %v", addr, err)
	}
	external, source, err := externalAddress(doc, addr, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return listening{}, err
	}
	var roller fault.Roller
	if f.seed != "" {
		roller = fault.NewSeeded(f.seed)
		logger.Info("fault rolls are seeded: a request replayed with the same X-Request-ID gets the same faults, and each retry of it a roll of its own")
	}
	logger.Info("redirects and bodies naming an upstream are rewritten to this address", "external_url", external.String(), "source", source)
	handler := proxy.New(holder, proxy.Options{
		Roller:    roller,
		Log:       logger,
		Templates: render.NewFiles(string(doc.Templates.Dir)),
		External:  external,
		Metrics:   metrics,
		Reporter:  reporter,
		// The document's tokens are the runtime's, current after a reload.
		AdminTokens: tokenDigests(envTokens),
		Journal:     jr,
		Sessions:    sessions,
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
	}
	handler.ResumeOn(srv)
	return listening{proxy.Listener(ln), srv}, nil
}

// listenAdmin binds the admin listener and builds its server.
func listenAdmin(f *serveFlags, doc *config.Document, api *admin.Server, metrics *telemetry.Metrics, logger *telemetry.Logger) (listening, error) {
	addr := cmp.Or(f.adminAddr, net.JoinHostPort(doc.Admin.Host.String(), strconv.Itoa(int(doc.Admin.Port))))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return listening{}, failed("the admin listener cannot bind %s: %v", addr, err)
	}
	srv := &http.Server{
		Handler:           metrics.InstrumentAdmin(compress.Handler(api), api.Route),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	logger.Info("the admin API is listening", "admin_addr", ln.Addr().String())
	// Where a person goes next.
	base := "http://" + browsable(ln.Addr()) + "/"
	how := "admin actions need a token: one of admin.tokens, DOPPEL_ADMIN_TOKENS, or doppel token add --name NAME"
	if *doc.Admin.Dashboard {
		logger.Info("open the dashboard in a browser; "+how, "url", base, "api", base+"swagger-ui/")
	} else {
		logger.Info("the admin API is described at its Swagger UI; "+how, "url", base+"swagger-ui/")
	}
	return listening{ln, srv}, nil
}

// browsable is a bound address as a browser on this machine reaches it: a
// wildcard bind is reached through loopback.
func browsable(a net.Addr) string {
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

// serveUntilSignal serves until SIGINT or SIGTERM, then drains in-flight
// requests for up to drainTimeout; a second signal exits at once.
func serveUntilSignal(logger *telemetry.Logger, signals <-chan os.Signal, proxies, admin listening) error {
	served := make(chan error, 2)
	for _, l := range []listening{proxies, admin} {
		if l.srv != nil {
			go func() { served <- l.srv.Serve(l.ln) }()
		}
	}
	select {
	case err := <-served:
		return failed("the proxy listener stopped: %v", err)
	case sig := <-signals:
		logger.Info("shutting down: draining in-flight requests", "signal", sig.String(), "timeout", drainTimeout.String())
	}
	go func() {
		sig := <-signals
		logger.Warn("second signal: exiting at once", "signal", sig.String())
		logger.Flush()
		os.Exit(exitRejected)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if admin.srv != nil {
		go func() { _ = admin.srv.Shutdown(ctx) }()
	}
	ph, _ := proxies.srv.Handler.(*proxy.Handler)
	if ph != nil {
		ph.Stopping() // parked answers say Connection: close from now on
	}
	if err := proxies.srv.Shutdown(ctx); err != nil {
		logger.Warn("in-flight requests did not finish in time", "error", err.Error())
		_ = proxies.srv.Close()
	}
	// Hanging requests hold connections the server handed over: they end
	// now, each recorded before the log is flushed.
	if ph != nil {
		ph.EndHangs()
		// Delayed answers waiting off the server finish, or go out at
		// once when the drain time is over.
		ph.EndParked(ctx)
	}
	logger.Info("stopped")
	return nil
}
