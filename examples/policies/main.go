// Command policies is a small insurance application that uses holdfast's
// edit locks: a list of policies showing who is editing what, edit pages
// that lock before they load, a read-only view of locked policies, take
// over from your own other tab, and an administrator who can release
// locks. Policies live in SQLite, locks in an embedded holdfast store, both
// in one data directory.
//
//	go run ./examples/policies
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/logstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	data := flag.String("data", "policies-data", "directory for the SQLite database and the embedded lock store")
	idle := flag.Duration("idle-timeout", 3*time.Minute, "release an editor's locks after this long without a heartbeat (a closed tab, a sleeping laptop)")
	inactive := flag.Duration("release-inactive-page-after", time.Hour, "release the lock of an open edit page nobody has typed or clicked in for this long (negative: never)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *data, appConfig{IdleTimeout: *idle, ReleaseInactivePageAfter: *inactive}); err != nil {
		fmt.Fprintln(os.Stderr, "policies:", err)
		os.Exit(1)
	}
}

// lockTypes are the record types and their policies, the same for every
// process that locks these records.
func lockTypes() holdfast.Config {
	return holdfast.Config{
		Types: map[string]holdfast.TypePolicy{
			// Anyone may read a policy; editing it needs the lock.
			"policy": {Policy: holdfast.ExclusiveWrite, DefaultTTL: 2 * time.Hour},
			// Coverages are members of their policy's aggregate: their
			// locks land on the policy.
			"coverage": {Policy: holdfast.ExclusiveWrite, DefaultTTL: 2 * time.Hour},
		},
	}
}

// run serves the example from the data directory, with the page timings
// of cfg.
func run(ctx context.Context, addr, data string, cfg appConfig) error {
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	st, err := logstore.Open(filepath.Join(data, "holdfast"), logstore.Config{})
	if err != nil {
		return fmt.Errorf("lock store: %w", err)
	}
	defer st.Close()
	mgr, err := holdfast.New(st, lockTypes())
	if err != nil {
		return err
	}
	defer mgr.Close()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "policies.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()

	cfg.Locks, cfg.Types, cfg.DB = mgr, lockTypes(), db
	h, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("Policies example: open http://%s/ and sign in; use a second browser or a private window to be a second person.\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	slog.Info("stopped")
	return nil
}
