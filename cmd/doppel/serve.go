package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doppelproxy/doppel/internal/admin"
	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/fleet"
	"github.com/doppelproxy/doppel/internal/instance"
	"github.com/doppelproxy/doppel/internal/store"
	"github.com/doppelproxy/doppel/internal/store/file"
	"github.com/doppelproxy/doppel/internal/store/postgres"
	"github.com/doppelproxy/doppel/internal/telemetry"
	"github.com/doppelproxy/doppel/internal/version"
	"github.com/spf13/cobra"
)

// Environment variables of serve's own flags.
const (
	envWorkers   = "DOPPEL_WORKERS"
	envProxyAddr = "DOPPEL_PROXY_ADDR"
	envAdminAddr = "DOPPEL_ADMIN_ADDR"
	envAdvertise = "DOPPEL_ADVERTISE_URL"
	envFleetKey  = "DOPPEL_FLEET_KEY"
	// envCounterTimeout is how long a counted request waits for the
	// fleet's counters (SPEC §18.1: 250 ms unless it says).
	envCounterTimeout = "DOPPEL_COUNTER_TIMEOUT"
	envExternalURL    = "DOPPEL_EXTERNAL_URL"
	envSeed           = "DOPPEL_SEED"
)

// drainTimeout bounds how long in-flight requests get after a signal.
const drainTimeout = 30 * time.Second

type serveFlags struct {
	store     storeFlags
	workers   int
	budget    int64 // DOPPEL_RENDER_BUDGET; 0 for the default
	proxyAddr string
	adminAddr string
	advertise string
	keyFile   string
	fleetKey  fleet.Key
	// counterTimeout is DOPPEL_COUNTER_TIMEOUT; 0 for the default.
	counterTimeout time.Duration
	socket         string
	seed           string
	watch          bool
	strict         bool
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
	fs.StringVar(&f.advertise, "advertise", "", "with --store postgres, the admin URL the other replicas reach this one at (env "+envAdvertise+"; default: http:// and the admin listener's address, a wildcard host replaced by this host's first address)")
	fs.StringVar(&f.keyFile, "fleet-key-file", "", "with --store postgres, the file holding the fleet key every replica shares, which signs the calls that read their journals (env "+envFleetKey+" holds the key itself); never stored in the database")
	fs.StringVar(&f.socket, "socket", "", "the control socket instead of control.socket")
	fs.StringVar(&f.seed, "seed", "", "make every fault roll a function of this seed, the request's X-Request-ID and the attempt: a retry with the same id is rolled anew (env "+envSeed+")")
	fs.BoolVar(&f.watch, "watch", false, "with the file store, reload by itself when the document changes")
	fs.BoolVar(&f.strict, "strict", false, "refuse a configuration with advisories, at start and on every reload and write, as if they were violations")
	return cmd
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
	return f.resolveFleet(cmd)
}

// resolveFleet applies the environment to the flags of a replica of a
// fleet (docs/fleet.md) and checks them: the advertised URL, the counters'
// timeout and the fleet key.
func (f *serveFlags) resolveFleet(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("advertise") {
		f.advertise = strings.TrimSpace(os.Getenv(envAdvertise))
	}
	if f.advertise != "" {
		if err := fleet.CheckAdvertise(f.advertise); err != nil {
			return usage("--advertise (or %s): %v", envAdvertise, err)
		}
	}
	if v := strings.TrimSpace(os.Getenv(envCounterTimeout)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond || d > 30*time.Second {
			return usage("%s must be a duration from 10ms to 30s, such as 250ms, not %q", envCounterTimeout, v)
		}
		f.counterTimeout = d
	}
	raw, from := os.Getenv(envFleetKey), envFleetKey
	if f.keyFile != "" {
		b, err := os.ReadFile(f.keyFile)
		if err != nil {
			return usage("--fleet-key-file: %v", err)
		}
		raw, from = string(b), "--fleet-key-file"
	}
	if strings.TrimSpace(raw) != "" {
		key, err := fleet.ParseKey(raw)
		if err != nil {
			return usage("%s: %v", from, err)
		}
		f.fleetKey = key
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
	doc, rev, pg, err := loadDocument(opts)
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
	st, err := openStore(opts, doc, pg)
	if err != nil {
		return err
	}
	defer st.Close()
	envTokens, err := startupChecks(doc, st, f.strict, logger)
	if err != nil {
		return err
	}
	// Signals are ours before anyone can see the listener: a SIGTERM sent
	// the moment the startup line appears is a graceful shutdown.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	inst, err := instance.Start(doc, instance.Options{
		Store:          st,
		Revision:       rev,
		Postgres:       pg,
		Follow:         opts.Kind == store.KindPostgres || f.watch,
		ProxyAddr:      f.proxyAddr,
		AdminAddr:      f.adminAddr,
		Advertise:      f.advertise,
		FleetKey:       f.fleetKey,
		CounterTimeout: f.counterTimeout,
		ControlSocket:  cmp.Or(f.socket, string(doc.Control.Socket)),
		Serves:         servedName(opts),
		Seed:           f.seed,
		ExternalURL:    strings.TrimSpace(os.Getenv(envExternalURL)),
		ConfigPath:     configPathOf(opts),
		StateHome:      stateHome(),
		Strict:         f.strict,
		EnvTokens:      envTokens,
		Log:            logger,
		Reporter:       reporter,
	})
	if err != nil {
		return failed("%v", err)
	}
	// Listening, not yet serving: a database's template files are written
	// out now, so that a start that fails leaves no directory behind and
	// no request is answered before they are there.
	if pg != nil {
		if err := pg.Materialize(context.Background()); err != nil {
			_ = inst.Shutdown(context.Background())
			return failed("cannot write the template files into %s: %v", doc.Templates.Dir, err)
		}
	}
	if pg != nil && f.fleetKey == nil {
		logger.Warn("no fleet key: the journal is read on this replica alone, and a read of the fleet's names the others missing; give every replica the same "+envFleetKey+" or --fleet-key-file", "replica", inst.Fleet.Self().ID)
	}
	rt := inst.Runtime.Load()
	proxies, tcpProxies := rt.ProxyCount()
	logger.Info("doppel started", "version", version.Version, "proxy_addr", inst.ProxyAddr().String(),
		"revision", string(rt.Revision), "proxies", proxies, "tcp_proxies", tcpProxies, "workers", f.workers,
		"memory_limit", memoryLimit, "render_budget", renderBudget, "replica", inst.Fleet.Self().ID, "advertise", inst.Fleet.Self().URL)
	return serveUntilSignal(logger, signals, inst)
}

// configPathOf is the configuration file's path, "" with a database.
func configPathOf(opts store.Options) string {
	if opts.Kind != store.KindFile {
		return ""
	}
	return opts.ConfigPath
}

// stateHome is where Doppel keeps state that has no configuration file to
// live beside: $XDG_STATE_HOME/doppel, else ~/.local/state/doppel; "" when
// neither is known.
func stateHome() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "doppel")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "doppel")
	}
	return ""
}

// loadDocument reads and checks the stored document: serve refuses one
// with violations, listing every one. A database is checked to be
// migrated first, and stays open for the store; the revision is the one
// it holds the document at (1.1's for a document Doppel 1.1 wrote last).
func loadDocument(opts store.Options) (*config.Document, config.Revision, *postgres.Store, error) {
	var pg *postgres.Store
	var doc *config.Document
	var rev config.Revision
	var err error
	if opts.Kind == store.KindPostgres {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if pg, err = openDatabase(ctx, opts.DatabaseURL, opts.ConfigName); err != nil {
			return nil, "", nil, err
		}
		if err = postgres.CheckMigrated(ctx, pg.Pool()); err == nil {
			var snap *store.Snapshot
			if snap, err = pg.Load(ctx); err == nil {
				doc, rev = snap.Document, snap.Revision
			}
		}
	} else {
		var src []byte
		if src, err = readDocument(opts); err != nil {
			return nil, "", nil, err
		}
		doc, err = config.Load(src)
	}
	if err != nil {
		if pg != nil {
			pg.Close()
		}
		var inv *config.Invalid
		if errors.As(err, &inv) {
			return nil, "", nil, failed("the configuration is invalid:\n%s", strings.Join(violationLines(inv, configPathOf(opts)), "\n"))
		}
		return nil, "", nil, failed("%v", err)
	}
	return doc, rev, pg, nil
}

// startTelemetry starts the log and the error reporting the document asks
// for.
func startTelemetry(doc *config.Document, stdout io.Writer) (*telemetry.Logger, *telemetry.Reporter, error) {
	level, err := telemetry.EnvLevel(string(doc.Logging.Level))
	if err != nil {
		return nil, nil, failed("%v", err)
	}
	logger := telemetry.NewLogger(stdout, string(doc.Logging.Level), string(doc.Logging.Format))
	logger.Level.Set(level)
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
		logger.Info("sentry reporting enabled", "dsn", telemetry.MaskDSN(dsn), "source", dsnSource)
	}
	return logger, reporter, nil
}

// startupChecks logs the advisories (refusing them with strict) and reads
// the environment's tokens, warning of those that shadow stored ones.
func startupChecks(doc *config.Document, st store.Store, strict bool, logger *telemetry.Logger) ([]admin.Token, error) {
	advisories := store.Advisories(context.Background(), st, doc)
	if strict && len(advisories) > 0 {
		return nil, failed("the configuration is invalid (--strict refuses its advisories):\n%s", strings.Join(advisoryLines(advisories, ""), "\n"))
	}
	for _, a := range advisories {
		logger.Warn(a.Message, "path", a.Path)
	}
	envTokens, err := admin.ParseEnvTokens(os.Getenv(admin.EnvTokens))
	if err != nil {
		return nil, failed("%v", err)
	}
	for _, t := range doc.Admin.Tokens {
		for _, e := range envTokens {
			if e.Name == t.Name {
				logger.Warn("a configured admin token is shadowed by one from the environment; the configured value will not authenticate",
					"name", string(t.Name), "variable", admin.EnvTokens)
			}
		}
	}
	return envTokens, nil
}

// advisoryLines are advisories one a line, each after prefix.
func advisoryLines(as []config.Advisory, prefix string) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = prefix + a.String()
	}
	return out
}

// openStore opens the store the document came from (pg, when it is the
// database, already open), for the changes to come. It creates nothing:
// templates.dir is made by the first template file written into it.
func openStore(opts store.Options, doc *config.Document, pg *postgres.Store) (store.Store, error) {
	dir := string(doc.Templates.Dir)
	if pg == nil {
		st, err := file.Open(opts.ConfigPath, dir)
		if err != nil {
			return nil, failed("cannot open the configuration store: %v", err)
		}
		return st, nil
	}
	pg.SetTemplates(dir)
	return pg, nil
}

// serveUntilSignal serves until SIGINT or SIGTERM, then drains in-flight
// requests for up to drainTimeout; a second signal exits at once.
func serveUntilSignal(logger *telemetry.Logger, signals <-chan os.Signal, inst *instance.Instance) error {
	select {
	case err := <-inst.Serve():
		_ = inst.Shutdown(context.Background())
		return failed("the proxy listener stopped: %v", err)
	case sig := <-signals:
		logger.Info("shutdown signal received, draining", "signal", sig.String(), "timeout", drainTimeout.String())
	}
	go func() {
		sig := <-signals
		logger.Warn("second signal, exiting now", "signal", sig.String())
		logger.Flush()
		os.Exit(exitRejected)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := inst.Shutdown(ctx); err != nil {
		logger.Warn("drain timed out", "error", err.Error())
		return nil
	}
	logger.Info("drained cleanly")
	return nil
}
