// Package bench is holdfast's load generator: it runs one workload against
// holdfast and against the systems users would pick instead, in the same
// run, with the same client machinery, and prints one table of throughput,
// latency, the server process's CPU time per operation, and ratios.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config says what to run. Peers whose address is empty are skipped with
// a message.
type Config struct {
	// Workloads to run, in order: cycle, hot, heartbeat, aggregate, scale.
	Workloads []string
	Clients   int           // concurrent clients; default 64
	Duration  time.Duration // measured time of each row; default 10s
	// Warmup is the unmeasured time before each row; default 1s,
	// NoWarmup for none.
	Warmup time.Duration
	// Executable is the holdfast binary the servers are started from.
	Executable string
	// Server is the URL of a running holdfast server; empty starts one
	// from Executable on Store.
	Server string
	// Store is the store of a started server; empty is the embedded store
	// in a temporary directory.
	Store string
	// HoldfastPostgres, when set, adds rows for a started holdfast server
	// whose store is this PostgreSQL database.
	HoldfastPostgres string
	// Peers.
	Postgres string // DSN of the lock-table peer
	Redis    string // host:port of a Redis with appendonly yes, appendfsync always
	Etcd     string // host:port of an etcd member's client URL
	// PostgresConns bounds the lock-table peer\'s connections; default
	// the number of clients.
	PostgresConns int
	NoTrivial     bool // skip the trivial handlers (the ceiling, and durable in the cycle)
	// ServerLogLevel is the --log-level of the started holdfast servers;
	// default warn.
	ServerLogLevel string
	// Coalesce is the linger of the coalescing client; default 200µs.
	Coalesce time.Duration
	// Sessions heartbeating in the heartbeat workload; default 10,000.
	Sessions int
	// IdleTimeout is the idle timeout the heartbeat workload's sessions
	// ask for with every heartbeat; zero is none.
	IdleTimeout time.Duration
	// ScaleLocks is how many locks the scale workload fills; default
	// 1,000,000.
	ScaleLocks int
	// Rounds is how many times each workload but scale runs every system,
	// an odd number; default 1. Each ratio is then the median of the
	// rounds' own, every round's printed beside it, so that one row
	// measured while something else loaded a shared machine does not
	// decide it.
	Rounds int
	// Out receives the table; Log progress and skips.
	Out, Log io.Writer
}

// Workloads is every workload, in the order they run.
var Workloads = []string{"cycle", "hot", "heartbeat", "aggregate", "scale"}

// NoWarmup as Config.Warmup measures each row from its start.
const NoWarmup time.Duration = -1

// defaults fills in the zero fields and refuses negative ones.
func (c *Config) defaults() error {
	if len(c.Workloads) == 0 {
		c.Workloads = Workloads
	}
	for _, w := range c.Workloads {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("bench: unknown workload %q (want %s)", w, strings.Join(Workloads, ", "))
		}
	}
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"Clients", c.Clients < 0},
		{"Duration", c.Duration < 0},
		{"Warmup", c.Warmup < 0 && c.Warmup != NoWarmup},
		{"Coalesce", c.Coalesce < 0},
		{"Sessions", c.Sessions < 0},
		{"IdleTimeout", c.IdleTimeout < 0},
		{"ScaleLocks", c.ScaleLocks < 0},
		{"PostgresConns", c.PostgresConns < 0},
		{"Rounds", c.Rounds < 0},
	} {
		if f.negative {
			return fmt.Errorf("bench: Config.%s is negative", f.name)
		}
	}
	if c.Rounds%2 == 0 && c.Rounds > 0 {
		return fmt.Errorf("bench: Config.Rounds is %d: an even count has no median round", c.Rounds)
	}
	if c.Clients == 0 {
		c.Clients = 64
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup == NoWarmup {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = time.Second
	}
	if c.ServerLogLevel == "" {
		c.ServerLogLevel = "warn"
	}
	if c.Coalesce == 0 {
		c.Coalesce = 200 * time.Microsecond
	}
	if c.Sessions == 0 {
		c.Sessions = 10_000
	}
	if c.ScaleLocks == 0 {
		c.ScaleLocks = 1_000_000
	}
	if c.Rounds == 0 {
		c.Rounds = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Executable == "" && (c.Server == "" || !c.NoTrivial || c.HoldfastPostgres != "") {
		return errors.New("the holdfast executable is needed to start servers")
	}
	return nil
}

// postgresConns is how many connections each system on PostgreSQL may
// open: the lock table's pool, and the pool of the holdfast server over
// PostgreSQL, so that both have the same connections to work with.
func (c *Config) postgresConns() int {
	if c.PostgresConns > 0 {
		return c.PostgresConns
	}
	return c.Clients
}

// withPoolSize returns dsn with pgx's pool_max_conns set to n, unless it
// sets a pool size itself. The server's default, the greater of 4 and
// the number of CPUs, would let it run only that many transactions at
// once where the lock table runs n.
func withPoolSize(dsn string, n int) string {
	if strings.Contains(dsn, "pool_max_conns") {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("pool_max_conns", strconv.Itoa(n))
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " pool_max_conns=" + strconv.Itoa(n) // keyword=value form
}

// system is one row's target with the server process it measures.
type system struct {
	name   string
	t      target
	server *process // nil when not known; CPU is then left blank
	// holdfast marks holdfast's own rows, the numerators of the ratios.
	holdfast bool
	// ceiling marks the trivial handler; trivial marks it and the
	// durable trivial handler, which both grant everything.
	ceiling, trivial bool
	// probe marks the disk probe's row, which locks nothing and is no
	// system to compare holdfast with (probeDisk).
	probe bool
	// prefix begins every key the workloads lock on this system: a
	// shared one, such as Redis, needs the run's own.
	prefix string
}

// key is the workload's key name on s. Workloads name the round in their
// keys: a request cut off at the end of a row may leave its key held, and
// a peer without holdfast's sessions refuses it even to its own owner.
func (s *system) key(format string, args ...any) string {
	return s.prefix + fmt.Sprintf(format, args...)
}

// Run runs every workload and prints the table.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "holdfast-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r := &runner{cfg: cfg, tmp: tmp}
	defer r.closeAll()

	if err := r.setUp(ctx); err != nil {
		return err
	}
	rounds := ""
	if cfg.Rounds > 1 {
		rounds = fmt.Sprintf(", %d rounds", cfg.Rounds)
		if slices.Contains(cfg.Workloads, "scale") {
			rounds += " (scale: one)"
		}
	}
	clients := "clients"
	if cfg.Clients == 1 {
		clients = "client"
	}
	fmt.Fprintf(cfg.Out, "holdfast bench: %d %s, %s per row (after %s warm-up)%s, %d CPUs shared by clients and servers\n\n",
		cfg.Clients, clients, cfg.Duration, cfg.Warmup, rounds, numCPU())
	var rows []row
	for _, w := range cfg.Workloads {
		n := cfg.Rounds
		if w == "scale" {
			n = 1 // minutes a round, and no peer to compare with
		}
		for round := range n {
			if n > 1 {
				r.logf("%s: round %d of %d", w, round+1, n)
			}
			r.round = round
			got, err := r.workload(ctx, w)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.logf("%s failed: %v", w, err)
				r.failed++
				got = append(got, row{workload: w, system: r.holdfast, note: "failed: " + oneLine(err.Error())})
			}
			for i := range got {
				got[i].round = round
			}
			rows = append(rows, got...)
		}
	}
	printTable(cfg.Out, rows)
	if cfg.Clients == 1 {
		printLatency(cfg.Out, rows)
	}
	if r.failed > 0 {
		return fmt.Errorf("%d rows failed; the table says why", r.failed)
	}
	return nil
}

type runner struct {
	cfg     Config
	tmp     string
	closers []func() error

	holdfast        *system // one request per operation
	holdfastBatched *system // coalescing client over the same server
	holdfastPG      *system // one request per operation, over PostgreSQL
	holdfastPGBatch *system // coalescing client over the same server
	trivial         *system
	trivialDurable  *system // in the cycle only
	peers           []*system
	serverProc      *process // the started holdfast server, for scale
	failed          int      // rows that ended in an error
	round           int      // of the workload running, from 0
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, format+"\n", args...)
}

func (r *runner) closeAll() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// setUp starts the servers and connects to every peer that was given.
func (r *runner) setUp(ctx context.Context) error {
	cfg := r.cfg
	url, proc := cfg.Server, (*process)(nil)
	if url == "" {
		dsn := cfg.Store
		if dsn == "" {
			dsn = filepath.Join(r.tmp, "holdfast-data")
		}
		p, err := r.startHoldfast(ctx, dsn)
		if err != nil {
			return err
		}
		url, proc, r.serverProc = p.url, p, p
	} else if p, ok := attach(url); ok {
		proc = p
	}
	single, err := newHTTPClient(url, cfg.Clients, 0)
	if err != nil {
		return err
	}
	batched, err := newHTTPClient(url, cfg.Clients, cfg.Coalesce)
	if err != nil {
		return err
	}
	r.holdfast = &system{name: "holdfast", t: &httpTarget{single}, server: proc, holdfast: true}
	r.holdfastBatched = &system{name: "holdfast, coalesced into /v1/batch", t: &httpTarget{batched}, server: proc, holdfast: true}

	if cfg.HoldfastPostgres != "" {
		if p, err := r.startHoldfast(ctx, withPoolSize(cfg.HoldfastPostgres, cfg.postgresConns())); err != nil {
			return fmt.Errorf("--holdfast-postgres: %w", err)
		} else if err := r.addHoldfastPG(p); err != nil {
			return err
		} else if db, ok := attach(pgAddr(cfg.HoldfastPostgres)); ok {
			// Its work is done in PostgreSQL, as the lock table's is.
			p.also = db
		} else {
			r.logf("holdfast over PostgreSQL: %q (the DSN's host:port) is not a loopback address on which a process of this machine listens, so its server CPU is the holdfast process's alone",
				pgAddr(cfg.HoldfastPostgres))
		}
	}
	if !cfg.NoTrivial {
		p, err := r.start(ctx, "trivial handler", cfg.Executable, "bench", "--serve-trivial")
		if err != nil {
			return err
		}
		c, err := newHTTPClient(p.url, cfg.Clients, 0)
		if err != nil {
			return err
		}
		r.trivial = &system{name: "trivial HTTP handler (ceiling)", t: &httpTarget{c}, server: p, ceiling: true, trivial: true}
		if slices.Contains(cfg.Workloads, "cycle") {
			// Its log beside the started server's store, on the same disk.
			p, err := r.start(ctx, "durable trivial handler", cfg.Executable, "bench", "--serve-trivial", "--durable", r.tmp)
			if err != nil {
				return err
			}
			c, err := newHTTPClient(p.url, cfg.Clients, 0)
			if err != nil {
				return err
			}
			r.trivialDurable = &system{name: durableTrivial, t: &httpTarget{c}, server: p, trivial: true}
		}
	}
	return r.connectPeers(ctx)
}

// addHoldfastPG adds the rows of the holdfast server p, which runs over
// PostgreSQL: one request per operation, and coalesced like the embedded
// store's second row.
func (r *runner) addHoldfastPG(p *process) error {
	single, err := newHTTPClient(p.url, r.cfg.Clients, 0)
	if err != nil {
		return err
	}
	batched, err := newHTTPClient(p.url, r.cfg.Clients, r.cfg.Coalesce)
	if err != nil {
		return err
	}
	r.holdfastPG = &system{name: "holdfast over PostgreSQL", t: &httpTarget{single}, server: p, holdfast: true}
	r.holdfastPGBatch = &system{name: "holdfast over PostgreSQL, coalesced into /v1/batch", t: &httpTarget{batched},
		server: p, holdfast: true}
	return nil
}

func (r *runner) startHoldfast(ctx context.Context, dsn string) (*process, error) {
	// At info, holdfast serve logs every request, which a server under
	// this load would not be left doing.
	args := []string{"serve", "--store", dsn, "--log-level", r.cfg.ServerLogLevel}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// Tables of its own, beside whatever else the database holds,
		// and apart from those of another run at the same time; dropped
		// once the server has stopped (closers run last first).
		schema := "holdfast_bench_" + runID
		args = append(args, "--migrate-on-start", "--schema", schema)
		r.closers = append(r.closers, func() error { return dropSchema(dsn, schema) })
	}
	return r.start(ctx, "holdfast serve", r.cfg.Executable, args...)
}

// dropSchema drops the schema a holdfast server over PostgreSQL used.
func dropSchema(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

func (r *runner) start(ctx context.Context, name, exe string, args ...string) (*process, error) {
	p, err := startProcess(ctx, name, exe, args...)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, p.stop)
	return p, nil
}

// connectPeers connects to every peer whose address was given. One that
// was given and cannot be used stops the run before anything is measured,
// rather than leaving a table without it.
func (r *runner) connectPeers(ctx context.Context) error {
	cfg := r.cfg
	add := func(flag, name, addr string, t target, prefix string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		r.closers = append(r.closers, t.close)
		s := &system{name: name, t: t, prefix: prefix}
		if p, ok := attach(addr); ok {
			s.server = p
		} else {
			r.logf("%s: %q is not a loopback host:port on which a process of this machine listens, so its server CPU is left blank", name, addr)
		}
		r.peers = append(r.peers, s)
		return nil
	}
	if cfg.Postgres == "" {
		r.logf("skipping the PostgreSQL lock table: no --postgres DSN given")
	} else {
		t, err := newPGTarget(ctx, cfg.Postgres, cfg.postgresConns())
		if err := add("--postgres", "PostgreSQL lock table", pgAddr(cfg.Postgres), t, "", err); err != nil {
			return err
		}
	}
	if cfg.Redis == "" {
		r.logf("skipping Redis: no --redis address given")
	} else {
		t, err := newRedisTarget(ctx, cfg.Redis, cfg.Clients)
		if err := add("--redis", "Redis SET NX, AOF always", cfg.Redis, t, keyPrefix, err); err != nil {
			return err
		}
	}
	if cfg.Etcd == "" {
		r.logf("skipping etcd: no --etcd address given")
	} else {
		// Its leases last a row and are revoked at its end (endRow).
		t, err := newEtcdTarget(ctx, cfg.Etcd, cfg.Clients, max(lockTTL, 2*(cfg.Warmup+cfg.Duration)))
		if err := add("--etcd", "etcd txn + lease", cfg.Etcd, t, keyPrefix, err); err != nil {
			return err
		}
	}
	return nil
}

// workload runs one workload on every system it applies to.
func (r *runner) workload(ctx context.Context, name string) ([]row, error) {
	switch name {
	case "cycle":
		rows, err := r.each(ctx, name, r.lockSystems(true), r.cycle)
		if err != nil {
			return nil, err
		}
		return append(rows, r.disk()), nil
	case "hot":
		return r.each(ctx, name, r.lockSystems(false), r.hot)
	case "heartbeat":
		return r.heartbeats(ctx)
	case "aggregate":
		return r.each(ctx, name, r.lockSystems(false), r.aggregate)
	case "scale":
		return r.scale(ctx)
	}
	return nil, fmt.Errorf("unknown workload %q", name)
}

// disk times the disk where the bench keeps its temporary files: where
// the server it starts keeps the embedded store, unless --store or
// --server points elsewhere (the row's note names the directory).
func (r *runner) disk() row {
	s := &system{name: "disk: write + fdatasync", probe: true}
	r.logf("cycle: %s…", s.name)
	got, err := probeDisk(r.tmp, diskSyncs)
	if err != nil {
		// Like a system's failure, it voids none of the other rows.
		r.logf("cycle: %s failed: %v", s.name, err)
		r.failed++
		got = row{note: "failed: " + oneLine(err.Error())}
	}
	got.workload, got.system = "cycle", s
	return got
}

// durableTrivial names the trivial handler made durable by the simplest
// group commit (DurableTrivialHandler): its row is what making each
// operation durable before answering costs on the machine, with no lock
// behind it.
const durableTrivial = "trivial HTTP handler + group commit"

// lockSystems lists the systems that lock keys: holdfast on each store,
// the ceiling and the peers; for the cycle also holdfast coalesced and the
// durable trivial handler.
func (r *runner) lockSystems(cycle bool) []*system {
	out := []*system{r.holdfast}
	if cycle {
		out = append(out, r.holdfastBatched)
	}
	if r.holdfastPG != nil {
		out = append(out, r.holdfastPG)
		if cycle {
			out = append(out, r.holdfastPGBatch)
		}
	}
	if r.trivial != nil {
		out = append(out, r.trivial)
	}
	if cycle && r.trivialDurable != nil {
		out = append(out, r.trivialDurable)
	}
	return append(out, r.peers...)
}

// inTurn returns systems in the order the running round measures them:
// every other round backwards, so that none is always measured first
// after the one before has loaded the machine, or always last as the
// load drifts. The cycle's disk probe still comes after them all.
func (r *runner) inTurn(systems []*system) []*system {
	if r.round%2 == 0 {
		return systems
	}
	backwards := slices.Clone(systems)
	slices.Reverse(backwards)
	return backwards
}

func (r *runner) each(ctx context.Context, workload string, systems []*system, fn func(context.Context, *system) (row, error)) ([]row, error) {
	var rows []row
	for _, s := range r.inTurn(systems) {
		r.logf("%s: %s…", workload, s.name)
		got, err := fn(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// One system failing does not void the others' rows.
			r.logf("%s: %s failed: %v", workload, s.name, err)
			r.failed++
			got = row{note: "failed: " + oneLine(err.Error())}
		}
		got.workload, got.system = workload, s
		rows = append(rows, got)
	}
	return rows, nil
}

// measure runs step on every client for the warm-up, then for the
// measured duration, and returns how many operations the measured part
// did, how long it took and the server's CPU time meanwhile. step returns
// how many operations it completed.
func (r *runner) measure(ctx context.Context, s *system, clients int, step func(ctx context.Context, client int, lat *[]time.Duration) (int, error)) (row, error) {
	var (
		measuring atomic.Bool
		ops       atomic.Int64
		lat       latencies
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			for runCtx.Err() == nil {
				var sample []time.Duration
				n, err := step(runCtx, c, &sample)
				if err != nil {
					if runCtx.Err() == nil {
						errOnce.Do(func() { firstErr = err; cancel() })
					}
					break
				}
				if measuring.Load() {
					ops.Add(int64(n))
					mine = append(mine, sample...)
				}
			}
			lat.add(mine)
		})
	}
	sleep(runCtx, r.cfg.Warmup)
	cpu0, cpuOK := s.server.cpu()
	busy0, total0, machineOK := machineTimes()
	measuring.Store(true)
	start := time.Now()
	sleep(runCtx, r.cfg.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu1, _ := s.server.cpu()
	busy1, total1, _ := machineTimes()
	cancel()
	wg.Wait()
	if e, ok := s.t.(rowEnder); ok {
		e.endRow()
	}
	if firstErr != nil {
		return row{}, firstErr
	}
	if ctx.Err() != nil {
		return row{}, ctx.Err()
	}
	out := row{ops: ops.Load(), elapsed: elapsed, p50: lat.percentile(50), p99: lat.percentile(99)}
	if cpuOK && out.ops > 0 {
		out.cpuPerOp = (cpu1 - cpu0) / time.Duration(out.ops)
		out.cpuKnown = true
	}
	if machineOK && total1 > total0 {
		out.busyCPUs = float64(busy1-busy0) / float64(total1-total0) * float64(numCPU())
		out.busyKnown = true
	}
	return out, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func owner(client int) string { return fmt.Sprintf("bench-%d", client) }

// timed runs fn and appends its duration to lat.
func timed(lat *[]time.Duration, fn func() error) error {
	start := time.Now()
	err := fn()
	*lat = append(*lat, time.Since(start))
	return err
}

// cycle: each client acquires and releases its own key, again and again.
// The latency is the acquire's.
func (r *runner) cycle(ctx context.Context, s *system) (row, error) {
	round := r.round
	return r.measure(ctx, s, r.cfg.Clients, func(ctx context.Context, c int, lat *[]time.Duration) (int, error) {
		keys := []string{s.key("cycle/%d/%d", round, c)}
		var granted bool
		err := timed(lat, func() (err error) { granted, err = s.t.acquire(ctx, owner(c), keys); return err })
		if err != nil {
			return 0, err
		}
		if !granted {
			return 0, fmt.Errorf("%s was refused to its only client", keys[0])
		}
		return 1, s.t.release(ctx, owner(c), keys)
	})
}

// aggregate: each client acquires 100 keys all or nothing, then releases
// them.
func (r *runner) aggregate(ctx context.Context, s *system) (row, error) {
	round := r.round
	return r.measure(ctx, s, r.cfg.Clients, func(ctx context.Context, c int, lat *[]time.Duration) (int, error) {
		keys := make([]string, 100)
		for i := range keys {
			keys[i] = s.key("aggregate/%d/%d/member/%d", round, c, i)
		}
		var granted bool
		err := timed(lat, func() (err error) { granted, err = s.t.acquire(ctx, owner(c), keys); return err })
		if err != nil {
			return 0, err
		}
		if !granted {
			return 0, errors.New("an aggregate was refused to its only client")
		}
		return 1, s.t.release(ctx, owner(c), keys)
	})
}

// hotKeys is how many keys the hot workload's clients fight over.
const hotKeys = 16

// hot: every client contends for 16 keys. Each grant is checked against
// the client-side record of who holds the key: two grants of one key that
// overlap in time are counted as violations.
func (r *runner) hot(ctx context.Context, s *system) (row, error) {
	var (
		holders          [hotKeys]atomic.Int64 // client+1 holding the key, 0 when free
		granted, refused atomic.Int64
		violations       atomic.Int64
		round            = r.round
	)
	res, err := r.measure(ctx, s, r.cfg.Clients, func(ctx context.Context, c int, lat *[]time.Duration) (int, error) {
		k := (c*7 + int(time.Now().UnixNano()>>10)) % hotKeys
		keys := []string{s.key("hot/%d/%d", round, k)}
		var ok bool
		err := timed(lat, func() (err error) { ok, err = s.t.acquire(ctx, owner(c), keys); return err })
		if err != nil {
			return 0, err
		}
		if !ok {
			refused.Add(1)
			return 1, nil
		}
		granted.Add(1)
		if !holders[k].CompareAndSwap(0, int64(c)+1) && s.locks() {
			violations.Add(1)
		}
		// Cleared before the release is sent: a grant to the next holder
		// can only come after.
		holders[k].CompareAndSwap(int64(c)+1, 0)
		return 1, s.t.release(ctx, owner(c), keys)
	})
	res.granted, res.refused, res.violations = granted.Load(), refused.Load(), violations.Load()
	if err == nil && res.violations > 0 {
		err = fmt.Errorf("%d grants overlapped another grant of the same key", res.violations)
	}
	return res, err
}
