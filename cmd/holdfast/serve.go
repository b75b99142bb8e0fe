package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/config"
	"github.com/holdfast/holdfast/internal/logwriter"
	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/server"
	"github.com/holdfast/holdfast/store"
)

const serveHelp = `
Usage: holdfast serve [--listen 127.0.0.1:7070] [--store DSN] [--config FILE] [flags]

Serves the holdfast HTTP API. Every flag can also be set by a HOLDFAST_*
environment variable or in the TOML config file; flags win over the
environment, which wins over the file. Bearer tokens come from
HOLDFAST_TOKENS ("role:token,role:token") or the file's tokens key.

Example:
  HOLDFAST_TOKENS=admin:s3cret holdfast serve --listen 0.0.0.0:7070 --store /var/lib/holdfast
`

// serveCommand runs the lock server until its context is cancelled
// (SIGINT or SIGTERM), then shuts down gracefully.
type serveCommand struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func newServeCommand(stdout, stderr io.Writer) *serveCommand {
	return &serveCommand{stdout: stdout, stderr: stderr, getenv: os.Getenv}
}

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", serveHelp)
	flags := config.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected arguments: %s (serve takes flags only)", strings.Join(fs.Args(), " "))
	}
	cfg, err := flags.Load(c.getenv)
	if err != nil {
		return usagef("serve: %v", err)
	}
	// The request log's lines share writes under load instead of costing
	// each request a system call of its own (docs/BENCHMARKS-HISTORY.md); Close,
	// deferred first so that it runs last, writes out the rest.
	out := logwriter.New(c.stderr)
	defer out.Close()
	log, err := newLogger(out, cfg)
	if err != nil {
		return err
	}
	err = c.runServer(ctx, cfg, log)
	if err != nil && cfg.LogFormat == "json" {
		// A collector that reads the log as JSON lines gets the failure
		// as one of them, with the exit code, instead of a line of text.
		code := report(io.Discard, io.Discard, err)
		log.Error("holdfast serve failed", "error", err.Error(), "exit_code", code)
		return exitStatus(code)
	}
	return err
}

// runServer runs the server with the logger made: opens the store, starts the
// Manager and the HTTP server, and returns once they have stopped.
func (c *serveCommand) runServer(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	for _, name := range config.UnknownEnv(os.Environ()) {
		log.Warn("ignoring an environment variable that holdfast does not read; is it misspelled? (holdfast serve -h names those it reads)", "variable", name)
	}
	tokens, err := cfg.ServerTokens()
	if err != nil {
		return err
	}

	st, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	tuneGC() // after the store's load, which sets the collector itself
	defer func() {
		if err := closeStore(); err != nil {
			log.Error("closing the store", "error", err)
		}
	}()

	metrics := server.NewMetrics()
	registerStoreMetrics(metrics.Registry(), st)
	hc := cfg.Manager()
	hc.Logger = log
	hc.Observer = metrics
	mgr, err := holdfast.New(st, hc)
	if err != nil {
		return fmt.Errorf("lock manager: %w", err)
	}
	defer mgr.Close()
	if err := raiseTokens(ctx, mgr, cfg.TokenFloor, log); err != nil {
		return err
	}
	if feed, ok := st.(remoteFeed); ok {
		stopFeed := followRemote(ctx, feed, mgr, log)
		defer stopFeed()
	}

	if len(tokens) == 0 {
		// config.Validate has refused this on any other address.
		log.Warn("no tokens configured: accepting unauthenticated requests with every right, on loopback only", "listen", cfg.Listen)
	}
	srv, err := server.New(server.Config{
		Manager:      mgr,
		Tokens:       tokens,
		Anonymous:    len(tokens) == 0,
		Metrics:      metrics,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Logger:       log,
	})
	if err != nil {
		return err
	}
	if cfg.DebugListen != "" {
		stopDebug, err := serveDebug(cfg.DebugListen, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	return serve(ctx, srv.HTTPServer(), cfg, log)
}

// raiseTokens raises the store's token counter to floor, if set, before
// anything is served: a server that cannot must not grant tokens a
// restored backup would grant again.
func raiseTokens(ctx context.Context, mgr *holdfast.Manager, floor int64, log *slog.Logger) error {
	if floor == 0 {
		return nil
	}
	raised, err := mgr.RaiseTokens(ctx, uint64(floor))
	if err != nil {
		return fmt.Errorf("raising the fencing-token counter to token_floor %d: %w", floor, err)
	}
	if raised {
		log.Info("raised the fencing-token counter: every lock granted from now on gets a token above token_floor", "token_floor", floor)
	} else {
		log.Info("the fencing-token counter is already at or above token_floor; left as it is", "token_floor", floor)
	}
	return nil
}

// serveDebug serves Go's profiler on its own loopback listener, apart from
// the API, so that no API token or route reaches it.
func serveDebug(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	log.Info("profiler listening", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { hs.Close() }, nil
}

// serve listens and answers until ctx ends, then stops accepting, lets
// in-flight requests finish within the shutdown timeout, and returns.
func serve(ctx context.Context, hs *http.Server, cfg config.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	log.Info("listening", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String())

	served := make(chan error, 1)
	go func() {
		if cfg.TLSCert != "" {
			served <- hs.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey)
		} else {
			served <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}

	log.Info("shutting down; a second signal stops at once", "timeout", time.Duration(cfg.ShutdownTimeout).String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		hs.Close()
		return fmt.Errorf("shutdown: requests still running after %s: %w", time.Duration(cfg.ShutdownTimeout), err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	log.Info("stopped")
	return nil
}

// openStore opens the store cfg.Store names; closing it is the caller's
// last step, after the Manager has stopped.
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (store.Store, func() error, error) {
	dsn := cfg.Store
	if dsn == "memory:" {
		log.Warn("in-memory store: nothing survives a restart and no other server sees these locks")
		st := memstore.New(memstore.Config{})
		return st, st.Close, nil
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok {
		switch scheme {
		case "postgres", "postgresql":
			return openPostgres(ctx, cfg, log)
		case "redis", "rediss", "etcd":
			return nil, nil, usagef("store %s://…: not supported yet; use a directory for the embedded store, or postgres://", scheme)
		default:
			return nil, nil, usagef("store %s://…: unknown kind of store (want a directory, memory: or postgres://)", scheme)
		}
	}
	earlier, err := pebblestore.Present(dsn)
	if err != nil {
		// Unsure what the directory holds: logstore would start empty.
		return nil, nil, fmt.Errorf("opening the embedded store in %s: %w", dsn, err)
	}
	var st store.Store
	if earlier {
		// A directory written before logstore became the default keeps
		// its engine, so that no lock it holds is lost.
		log.Info("the store directory holds the earlier embedded store (Pebble); serving it with pebblestore", slog.String("dir", dsn))
		st, err = pebblestore.Open(dsn, pebblestore.Config{Logger: log, Timeout: time.Duration(cfg.StoreTimeout)})
	} else {
		st, err = logstore.Open(dsn, logstore.Config{Logger: log, Timeout: time.Duration(cfg.StoreTimeout)})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("opening the embedded store in %s: %w", dsn, err)
	}
	return st, st.Close, nil
}

// registerStoreMetrics exports how many records an embedded store keeps in
// memory, which is what its memory grows with: locks (expired ones the
// sweep has not removed yet included), sessions (live and ended) and
// lost-lock records; and, for the log, its fdatasyncs. PostgreSQL keeps its
// records in the database: for it, the state of the connection pool. The
// in-memory store of "memory:" exports none of these.
func registerStoreMetrics(reg *prometheus.Registry, st store.Store) {
	var c recordCollector
	switch s := st.(type) {
	case *logstore.Store:
		c.counts = func() [3]int { m := s.Memory(); return [3]int{m.Locks, m.Sessions, m.Lost} }
		reg.MustRegister(syncCollector{s})
	case *pebblestore.Store:
		c.counts = func() [3]int { m := s.Memory(); return [3]int{m.Locks, m.Sessions, m.Lost} }
	case *pgstore.Store:
		reg.MustRegister(poolCollector{s})
		return
	default:
		return
	}
	reg.MustRegister(c)
}

// recordCollector reads the three counts once per scrape, so that they
// come from one moment.
type recordCollector struct{ counts func() [3]int }

var (
	recordKinds = [3]string{"locks", "sessions", "lost"}
	recordsDesc = prometheus.NewDesc("holdfast_store_records",
		"Records the embedded store keeps in memory, by kind: locks (expired ones not yet swept included), sessions (live and ended), lost (lost-lock records).",
		[]string{"kind"}, nil)
)

func (c recordCollector) Describe(ch chan<- *prometheus.Desc) { ch <- recordsDesc }

func (c recordCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.counts()
	for i, kind := range recordKinds {
		ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.GaugeValue, float64(counts[i]), kind)
	}
}

// syncCollector reads the embedded log's fdatasyncs at each scrape.
type syncCollector struct{ s *logstore.Store }

var (
	syncsDesc = prometheus.NewDesc("holdfast_log_syncs_total",
		"fdatasyncs of the embedded store's log that made writes durable; commits that wait together share one.", nil, nil)
	syncSecondsDesc = prometheus.NewDesc("holdfast_log_sync_seconds_total",
		"Time spent in those fdatasyncs.", nil, nil)
)

func (c syncCollector) Describe(ch chan<- *prometheus.Desc) { ch <- syncsDesc; ch <- syncSecondsDesc }

func (c syncCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Syncs()
	ch <- prometheus.MustNewConstMetric(syncsDesc, prometheus.CounterValue, float64(st.Syncs))
	ch <- prometheus.MustNewConstMetric(syncSecondsDesc, prometheus.CounterValue, st.Time.Seconds())
}

// poolCollector reads the PostgreSQL connection pool at each scrape.
type poolCollector struct{ s *pgstore.Store }

var (
	poolConnsDesc = prometheus.NewDesc("holdfast_pg_pool_connections",
		"Connections of the PostgreSQL pool, by state: acquired (in a transaction), idle, constructing.", []string{"state"}, nil)
	poolMaxDesc = prometheus.NewDesc("holdfast_pg_pool_max_connections",
		"The pool's largest size (pool_max_conns).", nil, nil)
	poolAcquiresDesc = prometheus.NewDesc("holdfast_pg_pool_acquires_total",
		"Connections taken from the pool.", nil, nil)
	poolWaitedDesc = prometheus.NewDesc("holdfast_pg_pool_waited_acquires_total",
		"Acquires that found no idle connection and waited for one to be returned or made: the pool, or the database, is too small for the load.", nil, nil)
	poolAcquireSecondsDesc = prometheus.NewDesc("holdfast_pg_pool_acquire_seconds_total",
		"Time spent taking connections from the pool, waits included.", nil, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConnsDesc, poolMaxDesc, poolAcquiresDesc, poolWaitedDesc, poolAcquireSecondsDesc} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.PoolStat()
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(st.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(st.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(st.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquiresDesc, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolWaitedDesc, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolAcquireSecondsDesc, prometheus.CounterValue, st.AcquireDuration().Seconds())
}

// openPostgres connects a pool to the database, migrates the schema when
// asked to, and returns a store whose commits other servers on the same
// schema hear of (see followRemote).
func openPostgres(ctx context.Context, cfg config.Config, log *slog.Logger) (store.Store, func() error, error) {
	pool, err := connectPostgres(ctx, cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	if cfg.MigrateOnStart {
		if err := pgstore.Migrate(ctx, pool, cfg.Schema); err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("migrating schema %s: %w", cfg.Schema, err)
		}
		log.Info("schema migrated", "schema", cfg.Schema, "version", pgstore.SchemaVersion)
	}
	st, err := pgstore.New(ctx, pool, pgstore.Config{Schema: cfg.Schema, Logger: log, Notify: true, Timeout: time.Duration(cfg.StoreTimeout)})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	log.Info("store: PostgreSQL", "schema", cfg.Schema, "max_conns", pool.Config().MaxConns)
	return st, func() error {
		err := st.Close()
		pool.Close()
		return err
	}, nil
}

// connectPostgres builds a pool from a postgres:// URL (pool_max_conns
// and the other pool_* parameters are pgxpool's) and checks that the
// database answers, so a wrong address fails at start, not at the first
// request. Errors never repeat the URL: it may hold a password.
func connectPostgres(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, usagef("store: not a valid postgres:// URL (check its syntax and its pool_* parameters)")
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: connecting to PostgreSQL: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: PostgreSQL at %s:%d does not answer: %w", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// remoteFeed is a store that can tell of audit entries committed by
// other servers sharing it; pgstore does through LISTEN/NOTIFY.
type remoteFeed interface {
	Listen(ctx context.Context, fn func([]store.AuditEntry)) error
}

// followRemote publishes other servers' audit entries to this server's
// subscribers, so an event stream on any node sees every node's commits.
// It returns a function that stops it and waits until it has.
func followRemote(ctx context.Context, feed remoteFeed, mgr *holdfast.Manager, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := feed.Listen(ctx, func(entries []store.AuditEntry) { mgr.Publish(entries...) })
		if err != nil && ctx.Err() == nil {
			log.Error("following other servers' events stopped", "error", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func newLogger(w io.Writer, cfg config.Config) (*slog.Logger, error) {
	level, err := cfg.SlogLevel()
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
