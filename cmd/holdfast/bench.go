package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/holdfast/holdfast/internal/bench"
)

const benchHelp = `
Usage: holdfast bench [--workloads cycle,hot,heartbeat,aggregate,scale] [--clients 64] [--duration 10s]
                      [--rounds 1] [--postgres DSN] [--redis HOST:PORT] [--etcd HOST:PORT]
                      [--holdfast-postgres DSN] [--server URL]

Runs each workload against holdfast and against the systems users would
pick instead, in one run, with the same client machinery, and prints one
table: throughput, p50 and p99 latency, the server process's CPU time per
operation (Linux), and the ratio of holdfast to each other system. It
starts "holdfast serve" on a temporary embedded store and a trivial HTTP
handler (the transport ceiling) itself; each peer is skipped with a
message unless its address is given; one given that cannot be reached
or used (a Redis without AOF always) stops the run. docs/BENCHMARKS.md says how to start the peers.

The cycle workload also runs the trivial handler made durable by the
simplest group commit (each acquire and release written to a log beside
holdfast's store, one fdatasync per group, before the answer): what
durability alone costs on this machine, without a lock behind it. And it
times the disk under the temporary directory (a small write and
fdatasync, 500 times). With --clients 1 the table ends
with each holdfast acquire's p50 divided by that sync's p50 plus the
ceiling's acquire p50.

With --rounds N (odd) each workload but scale runs every system N times,
in turn, every other round in reverse order. The table then shows each
system's round of median throughput, and each ratio, the latency at one
client too, is the median of the rounds' own, every round's printed
beside it, so that one row measured while something else loaded a shared
machine does not decide it.

The heartbeat workload's sessions ask for --idle-timeout with every
heartbeat, as an editor's client does (at least 1m, so that none idles
out between its heartbeats); --idle-timeout 0 measures sessions without
one.

Example:
  holdfast bench --postgres postgres://postgres@127.0.0.1:5432/test \
    --redis 127.0.0.1:6380 --etcd 127.0.0.1:2379
`

type benchCommand struct {
	stdout, stderr io.Writer
}

func newBenchCommand(stdout, stderr io.Writer) *benchCommand {
	return &benchCommand{stdout: stdout, stderr: stderr}
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", benchHelp)
	cfg := bench.Config{Out: c.stdout, Log: c.stderr}
	workloads := fs.String("workloads", strings.Join(bench.Workloads, ","), "comma-separated workloads to run")
	fs.IntVar(&cfg.Clients, "clients", 64, "concurrent clients")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured time of each row")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured time before each row (0: none)")
	fs.StringVar(&cfg.Server, "server", "", "URL of a running holdfast server (default: start one)")
	fs.StringVar(&cfg.Store, "store", "", "store of the started server (default: embedded, in a temporary directory)")
	fs.StringVar(&cfg.HoldfastPostgres, "holdfast-postgres", "", "also start a holdfast server on this PostgreSQL DSN")
	fs.StringVar(&cfg.Postgres, "postgres", "", "PostgreSQL DSN for the hand-rolled lock table peer")
	fs.IntVar(&cfg.PostgresConns, "postgres-conns", 0, "connections of the lock-table peer (default: --clients)")
	fs.StringVar(&cfg.Redis, "redis", "", "host:port of Redis started with --appendonly yes --appendfsync always")
	fs.StringVar(&cfg.Etcd, "etcd", "", "host:port of an etcd member's client URL")
	fs.BoolVar(&cfg.NoTrivial, "no-trivial", false, "skip the trivial handlers: the ceiling and its durable twin")
	fs.DurationVar(&cfg.Coalesce, "coalesce", 200*time.Microsecond, "linger of the coalescing client")
	fs.IntVar(&cfg.Sessions, "sessions", 10_000, "sessions of the heartbeat workload")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "idle timeout of the heartbeat workload's sessions (0: none)")
	fs.IntVar(&cfg.ScaleLocks, "scale-locks", 1_000_000, "locks the scale workload fills")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "times each workload but scale runs every system, odd; ratios are the rounds' median")
	fs.StringVar(&cfg.ServerLogLevel, "server-log-level", "warn", "--log-level of the holdfast servers the bench starts")
	trivial := fs.Bool("serve-trivial", false, "serve only the trivial handler, on --listen (the bench starts it so)")
	listen := fs.String("listen", "127.0.0.1:0", "address of --serve-trivial")
	durable := fs.String("durable", "", "with --serve-trivial: make every acquire and release durable in a log in this directory before answering")
	wait := fs.Duration("wait", 0, "with --serve-trivial: answer every acquire and release after a group wait this long, writing nothing")
	if _, _, err := parseArgs(fs, args); err != nil {
		return err
	}
	switch {
	case (*durable != "" || *wait != 0) && !*trivial:
		return usagef("bench: --durable and --wait go with --serve-trivial")
	case *durable != "" && *wait != 0:
		return usagef("bench: --durable or --wait, not both: one writes and syncs, the other only waits")
	case *wait < 0:
		return usagef("bench: --wait must not be negative")
	case *trivial:
		return serveTrivial(ctx, *listen, *durable, *wait, c.stderr)
	}
	cfg.Workloads = strings.Split(*workloads, ",")
	if err := checkBenchFlags(&cfg); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: finding the holdfast executable: %w", err)
	}
	cfg.Executable = exe
	return bench.Run(ctx, cfg)
}

// checkBenchFlags refuses counts and durations that cannot run, which the
// library would otherwise replace with its defaults, and a --server that
// is no URL; it turns --warmup 0 into the library's "none".
func checkBenchFlags(cfg *bench.Config) error {
	for _, w := range cfg.Workloads {
		if !slices.Contains(bench.Workloads, w) {
			return usagef("bench: unknown workload %q in --workloads (want a comma-separated list of %s)", w, strings.Join(bench.Workloads, ", "))
		}
	}
	switch {
	case cfg.Clients < 1:
		return usagef("bench: --clients must be at least 1")
	case cfg.Duration <= 0:
		return usagef("bench: --duration must be positive")
	case cfg.Warmup < 0:
		return usagef("bench: --warmup must not be negative (0: none)")
	case cfg.Coalesce <= 0:
		return usagef("bench: --coalesce must be positive")
	case cfg.Sessions < 1:
		return usagef("bench: --sessions must be at least 1")
	case cfg.IdleTimeout < 0 || cfg.IdleTimeout > 0 && cfg.IdleTimeout < time.Minute:
		// Shorter, a session could idle out between two of its heartbeats
		// and end the run with an error.
		return usagef("bench: --idle-timeout must be 0 (none) or at least 1m")
	case cfg.ScaleLocks < 1:
		return usagef("bench: --scale-locks must be at least 1")
	case cfg.Rounds < 1 || cfg.Rounds%2 == 0:
		return usagef("bench: --rounds must be odd (1, 3, 5…), so that each median is one round's")
	case cfg.PostgresConns < 0:
		return usagef("bench: --postgres-conns must not be negative (0: one per client)")
	}
	if cfg.Server != "" {
		if err := checkServerURL("bench: --server", cfg.Server); err != nil {
			return err
		}
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = bench.NoWarmup
	}
	return nil
}

// serveTrivial serves the trivial handler until ctx ends; durable when
// dir is not empty, with its log there, or waiting for each group when
// wait is not 0.
func serveTrivial(ctx context.Context, addr, dir string, wait time.Duration, stderr io.Writer) error {
	h, kind := bench.TrivialHandler(), "trivial handler"
	var log io.Closer // of the durable or waiting handler
	switch {
	case dir != "":
		var err error
		if h, log, err = bench.DurableTrivialHandler(dir); err != nil {
			return fmt.Errorf("bench: --durable: %w", err)
		}
		kind = "durable trivial handler, its log in " + dir
	case wait != 0:
		h, log = bench.WaitingTrivialHandler(wait)
		kind = fmt.Sprintf("trivial handler waiting %s for each group", wait)
	}
	if log != nil {
		defer log.Close()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "holdfast bench: serving the %s on http://%s\n", kind, ln.Addr())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
