package histcheck_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/histcheck"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/internal/tcpproxy"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/server"
)

// newSchema migrates a new schema of the database at dsn and drops it when
// the test ends.
func newSchema(t *testing.T, dsn string) string {
	t.Helper()
	direct, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "hf_histcheck_" + hex.EncodeToString(b[:])
	if err := pgstore.Migrate(context.Background(), direct, schema); err != nil {
		direct.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer direct.Close()
		if _, err := direct.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// outage takes the database away and brings it back.
type outage struct {
	name        string
	stop, start func()
}

// TestPostgresOutage cuts every connection to the shared PostgreSQL server
// and refuses new ones, three times, under load (see outageHistory).
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedDSN(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := tcpproxy.New(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(px.Addr())
	cfg.ConnConfig.Host = host
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Port = uint16(p)
	cut := outage{"connections cut", px.Cut, px.Restore}
	outageHistory(t, cfg, newSchema(t, dsn), 7, []outage{cut, cut, cut})
}

// TestPostgresRestart stops and starts a private PostgreSQL server under
// load, four times: twice a fast shutdown, twice an immediate one (a crash,
// recovered from the WAL at the next start). See outageHistory.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	restart := func(mode pgtest.Mode) outage {
		return outage{mode.String() + " stop and start", func() { srv.Stop(mode) }, srv.Start}
	}
	outageHistory(t, cfg, newSchema(t, srv.DSN()), 11, []outage{
		restart(pgtest.Fast), restart(pgtest.Immediate), restart(pgtest.Fast), restart(pgtest.Immediate),
	})
}

// outageHistory runs the history workload through the real server on the
// PostgreSQL store, reached with cfg, while the database goes away and
// comes back as each outage says. While it is away every answer is 503
// with Retry-After and nothing is granted; every answer the outages leave
// unknown is such a 503 (never a 500 or a dropped request); once it is
// back, service resumes without any restart of holdfast; and the whole
// history is linearizable under the lock model.
func outageHistory(t *testing.T, cfg *pgxpool.Config, schema string, seed uint64, outages []outage) {
	ctx := context.Background()
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := holdfast.New(st, holdfast.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Anonymous: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		mgr.Close()
		st.Close()
	}()
	c, err := client.New(client.Config{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}

	rec := histcheck.NewRecorder(longTTL)
	w := histcheck.Workload{Prefix: "outage", Families: 4, Clients: 8, Seed: seed,
		// A client that met the outage waits until the server is ready
		// again, so each contributes one unknown outcome per outage.
		OnUnknown: func(ctx context.Context) bool {
			for ctx.Err() == nil {
				if c.Ping(ctx) == nil {
					return true
				}
				time.Sleep(20 * time.Millisecond)
			}
			return false
		},
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(loadCtx, c, rec)
	}()

	var windows [][2]int64 // while the database was away, in recorder time
	for i, o := range outages {
		time.Sleep(300 * time.Millisecond) // load before the outage
		from := len(rec.History())
		o.stop()
		down := rec.Now()
		wantRefusals(t, hs.URL, i)
		time.Sleep(300 * time.Millisecond) // load against the outage
		up := rec.Now()
		o.start()
		deadline := time.Now().Add(30 * time.Second)
		for c.Ping(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("outage %d (%s): the server is not ready 30s after the database came back", i, o.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		windows = append(windows, [2]int64{down, up})
		ready := rec.Now()
		rec.Cut()
		// Full service: the clients' requests succeed again.
		for !slices.ContainsFunc(rec.History(), func(op histcheck.Op) bool {
			return op.Call >= ready && op.Output.Outcome == histcheck.OK
		}) {
			if time.Now().After(deadline) {
				t.Fatalf("outage %d (%s): no request succeeded within 30s of the database's return", i, o.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("outage %d (%s): %d operations around it; ready %s and serving %s after the database was told to start",
			i, o.name, len(rec.History())-from, time.Duration(ready-up).Round(time.Millisecond), time.Duration(rec.Now()-up).Round(time.Millisecond))
	}
	time.Sleep(300 * time.Millisecond) // load after the last outage
	stopLoad()
	<-done
	if err := w.ReadAll(ctx, c, rec, w.Clients); err != nil {
		t.Fatal(err)
	}

	h := rec.History()
	counts := map[histcheck.Outcome]int{}
	for _, op := range h {
		counts[op.Output.Outcome]++
		if op.Output.Outcome == histcheck.Unknown && op.Output.RetryAfter <= 0 {
			t.Errorf("an unknown outcome that is not 503 with Retry-After: %+v → %+v", op.Input, op.Output)
		}
		for _, win := range windows {
			if op.Call >= win[0] && op.Return <= win[1] && op.Output.Outcome != histcheck.Unknown {
				t.Errorf("an answer other than unavailable while the database was away: %+v → %+v", op.Input, op.Output)
			}
		}
	}
	t.Logf("%d operations: %v", len(h), counts)

	if counts[histcheck.Unknown] == 0 || counts[histcheck.OK] == 0 || counts[histcheck.Locked] == 0 {
		t.Fatalf("the outages were not met under load: %v", counts)
	}
	if err := histcheck.Check(h, histcheck.CheckConfig{VisualizeDir: histcheck.VisualizeDir()}); err != nil {
		t.Fatal(err)
	}
}

// wantRefusals checks the raw answers while the database is away: 503 with
// Retry-After for a write, a read and readiness.
func wantRefusals(t *testing.T, base string, outage int) {
	t.Helper()
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/locks/acquire", `{"keys": ["outage/probe"], "owner": {"session": "probe"}}`},
		{"GET", "/v1/locks?key=outage/probe", ""},
		{"GET", "/readyz", ""},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("outage %d: %s %s: status %d, want 503", outage, r.method, r.path, res.StatusCode)
		}
		if r.path != "/readyz" && res.Header.Get("Retry-After") == "" {
			t.Errorf("outage %d: %s %s: 503 without Retry-After", outage, r.method, r.path)
		}
	}
}
