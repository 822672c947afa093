package main

import (
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
	"github.com/doppelproxy/doppel/internal/compress"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/control"
	"github.com/doppelproxy/doppel/internal/fault"
	"github.com/doppelproxy/doppel/internal/proxy"
	"github.com/doppelproxy/doppel/internal/render"
	"github.com/doppelproxy/doppel/internal/runtime"
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
	proxyAddr string
	adminAddr string
	socket    string
	seed      string
	watch     bool
}

func newServeCmd(stdout io.Writer) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
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
	fs.StringVar(&f.seed, "seed", "", "make every fault roll a function of this seed and the request's X-Request-ID (env "+envSeed+")")
	fs.BoolVar(&f.watch, "watch", false, "with the file store, reload by itself when the document changes")
	return cmd
}

// watchFile reloads, as config reload would, whenever the document at
// path changes; a rejected edit is logged with every violation and the
// running configuration stays.
func watchFile(ctx context.Context, path string, ctl *runtime.Controller, logger *telemetry.Logger) (func(), error) {
	return file.Watch(ctx, path, func() {
		res, err := ctl.Reload(ctx)
		if err != nil {
			var inv *config.Invalid
			if errors.As(err, &inv) {
				logger.Warn("the edited configuration is rejected; the running one stays", "violations", inv.Lines())
				return
			}
			logger.Warn("the edited configuration could not be loaded; the running one stays", "error", err.Error())
			return
		}
		logger.Info("reloaded after the configuration file changed", "revision", string(res.Runtime.Revision), "proxies", len(res.Runtime.Proxies))
	})
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

// resolve applies the environment to serve's own flags and checks them.
func (f *serveFlags) resolve(cmd *cobra.Command) error {
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
	if err := f.resolve(cmd); err != nil {
		return err
	}
	goruntime.GOMAXPROCS(f.workers)
	if f.watch && opts.Kind != store.KindFile {
		return usage("--watch is for the file store; with --store postgres every replica follows changes by itself")
	}

	var pg *postgres.Store
	var src []byte
	if opts.Kind == store.KindPostgres {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		pg, err = openDatabase(ctx, opts.DatabaseURL, opts.ConfigName)
		if err == nil {
			if err = postgres.CheckMigrated(ctx, pg.Pool()); err != nil {
				err = failed("%v", err)
			} else if src, err = pg.Source(ctx); err != nil {
				err = failed("%v", err)
			}
		}
		cancel()
		if err != nil {
			if pg != nil {
				pg.Close()
			}
			return err
		}
	} else if src, err = readDocument(opts); err != nil {
		return err
	}
	doc, err := config.Load(src)
	if err != nil {
		var inv *config.Invalid
		if errors.As(err, &inv) {
			return failed("the configuration is invalid:\n%s", strings.Join(inv.Lines(), "\n"))
		}
		return failed("%v", err)
	}

	logger := telemetry.NewLogger(stdout, string(doc.Logging.Level), string(doc.Logging.Format))
	defer logger.Flush()
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
		return failed("%v", err)
	}
	defer reporter.Flush()
	if reporter.Enabled() {
		logger.Info("errors are reported to Sentry", "dsn", telemetry.MaskDSN(dsn), "source", dsnSource)
	}
	for _, a := range config.Advisories(doc) {
		logger.Warn(a.Message, "path", a.Path)
	}
	if err := os.MkdirAll(string(doc.Templates.Dir), 0o755); err != nil {
		return failed("cannot create the template directory: %v", err)
	}
	envTokens, err := admin.ParseEnvTokens(os.Getenv(admin.EnvTokens))
	if err != nil {
		return failed("%v", err)
	}
	for _, t := range doc.Admin.Tokens {
		for _, e := range envTokens {
			if e.Name == t.Name {
				logger.Warn("a configured token is shadowed by "+admin.EnvTokens+" and stops working", "token", string(t.Name))
			}
		}
	}
	var st store.Store
	if pg != nil {
		pg.SetTemplates(string(doc.Templates.Dir))
		if err := pg.Materialize(context.Background()); err != nil {
			return failed("cannot write the template files: %v", err)
		}
		st = pg
	} else if st, err = file.Open(opts.ConfigPath, string(doc.Templates.Dir)); err != nil {
		return failed("cannot open the configuration store: %v", err)
	}
	defer st.Close()
	rt, err := runtime.Compile(doc)
	if err != nil {
		return failed("cannot compile the configuration: %v", err)
	}
	holder := runtime.NewHolder(rt)
	ctl := runtime.NewController(holder, st)
	metrics := telemetry.NewMetrics(version.Version, *doc.Admin.Dashboard)
	publishMocks(metrics, nil, rt)
	ctl.OnSwap(func(old, next *runtime.Runtime) { publishMocks(metrics, old, next) })

	socket := f.socket
	if socket == "" {
		socket = string(doc.Control.Socket)
	}
	var claimed []config.Name
	for _, t := range envTokens {
		claimed = append(claimed, t.Name)
	}
	listenCtx, stopListening := context.WithCancel(context.Background())
	defer stopListening()
	if pg != nil {
		// Live propagation: every write to this configuration, by any
		// replica, is announced; this one reloads itself.
		go postgres.Listen(listenCtx, opts.DatabaseURL, opts.ConfigName, logger.Logger, func(revision string) bool {
			if revision != "" && revision == string(holder.Load().Revision) {
				return true // our own write, already in force
			}
			res, err := ctl.Reload(listenCtx)
			if err != nil {
				// An invalid document stays invalid until the next write;
				// anything else (a connection the database dropped) may
				// pass, and is tried again.
				var inv *config.Invalid
				retry := !errors.As(err, &inv)
				logger.Warn("a change in the database could not be loaded; the running configuration is unchanged",
					"error", err.Error(), "retrying", retry)
				return !retry
			}
			logger.Info("reloaded after a change in the database", "revision", string(res.Runtime.Revision), "proxies", len(res.Runtime.Proxies))
			return true
		})
	}
	if f.watch {
		stopWatching, err := watchFile(listenCtx, opts.ConfigPath, ctl, logger)
		if err != nil {
			return failed("cannot watch %s: %v", opts.ConfigPath, err)
		}
		defer stopWatching()
	}
	ctlSrv, err := control.Listen(socket, ctl, claimed)
	if err != nil {
		return failed("%v", err)
	}
	defer ctlSrv.Close()
	go ctlSrv.Serve()

	addr := f.proxyAddr
	if addr == "" {
		addr = net.JoinHostPort(doc.Server.Host.String(), strconv.Itoa(int(doc.Server.Port)))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failed("the proxy listener cannot bind %s: %v", addr, err)
	}
	var roller fault.Roller
	if f.seed != "" {
		roller = fault.NewSeeded(f.seed)
		logger.Info("fault rolls are seeded: a request replayed with the same X-Request-ID gets the same faults")
	}
	external, source, err := externalAddress(doc, addr, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return err
	}
	logger.Info("redirects and bodies naming an upstream are rewritten to this address", "external_url", external.String(), "source", source)
	srv := &http.Server{
		Handler: proxy.New(holder, proxy.Options{
			Roller:    roller,
			Log:       logger,
			Templates: render.NewFiles(string(doc.Templates.Dir)),
			External:  external,
			Metrics:   metrics,
			Reporter:  reporter,
		}),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       2 * time.Minute,
		// `OPTIONS *` is a request like any other: it resolves, and is
		// refused as a path that is not one.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     log.New(io.Discard, "", 0),
	}
	// Signals are ours before anyone can see the listener: a SIGTERM sent
	// the moment the startup line appears is a graceful shutdown.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	var adminSrv *http.Server
	served := make(chan error, 2)
	if *doc.Admin.Enable {
		aaddr := f.adminAddr
		if aaddr == "" {
			aaddr = net.JoinHostPort(doc.Admin.Host.String(), strconv.Itoa(int(doc.Admin.Port)))
		}
		aln, err := net.Listen("tcp", aaddr)
		if err != nil {
			_ = ln.Close()
			return failed("the admin listener cannot bind %s: %v", aaddr, err)
		}
		api := admin.New(ctl, envTokens, logger)
		api.Seeded = f.seed != ""
		api.Metrics = metrics.Handler()
		adminSrv = &http.Server{
			Handler:           metrics.InstrumentAdmin(compress.Handler(api), api.Route),
			ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes:    1 << 20,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          log.New(io.Discard, "", 0),
		}
		go func() { served <- adminSrv.Serve(aln) }()
		logger.Info("the admin API is listening", "admin_addr", aln.Addr().String())
	}
	go func() { served <- srv.Serve(ln) }()
	logger.Info("doppel is serving",
		"version", version.Version,
		"proxy_addr", ln.Addr().String(),
		"revision", string(rt.Revision),
		"proxies", len(rt.Proxies),
		"workers", f.workers,
	)

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
	if adminSrv != nil {
		go func() { _ = adminSrv.Shutdown(ctx) }()
	}
	if err := srv.Shutdown(ctx); err != nil {
		logger.Warn("in-flight requests did not finish in time", "error", err.Error())
		_ = srv.Close()
	}
	logger.Info("stopped")
	return nil
}
