package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/internal/tcpproxy"
)

// startNode runs "holdfast serve" on a PostgreSQL schema, sweeping often
// so that several nodes sweep at once, and waits until it is ready.
func startNode(t *testing.T, dsn, schema string) *serveProcess {
	t.Helper()
	return startServe(t, dsn, "--schema", schema, "--sweep-interval", "50ms", "--log-level", "warn")
}

func get(u string) (int, http.Header) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func startNodes(t *testing.T, n int) []*serveProcess {
	t.Helper()
	dsn := pgtest.SharedDSN(t)
	schema := migratedSchema(t, dsn)
	nodes := make([]*serveProcess, n)
	for i := range nodes {
		nodes[i] = startNode(t, dsn, schema)
	}
	return nodes
}

func acquire(c *client.Client, key, session string) (*holdfast.AcquireResult, error) {
	return c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: session, Name: session}})
}

// Three servers on one schema grant each key to exactly one of many
// racers spread over all of them, and all three agree on the winner.
func TestNodesOneWinnerPerKey(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	clients := make([]*client.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = newClient(t, n.url)
	}
	const rounds, perNode = 10, 6
	for round := range rounds {
		key := fmt.Sprintf("policy/race-%d", round)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			refused int
		)
		gate := make(chan struct{})
		for i := range len(nodes) * perNode {
			wg.Go(func() {
				<-gate
				s := fmt.Sprintf("s-%d-%d", round, i)
				_, err := acquire(clients[i%len(nodes)], key, s)
				mu.Lock()
				defer mu.Unlock()
				var locked *holdfast.LockedError
				switch {
				case err == nil:
					winners = append(winners, s)
				case errors.As(err, &locked):
					refused++
				default:
					t.Errorf("acquire on node %d: %v", i%len(nodes), err)
				}
			})
		}
		close(gate)
		wg.Wait()
		if len(winners) != 1 || refused != len(nodes)*perNode-1 {
			t.Fatalf("round %d: %d granted %v, %d refused; want exactly 1 and %d", round, len(winners), winners, refused, len(nodes)*perNode-1)
		}
		for i, c := range clients {
			page, err := c.Locks(context.Background(), holdfast.LockQuery{Prefix: key})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Locks) != 1 || page.Locks[0].Owner.Session != winners[0] {
				t.Fatalf("round %d: node %d lists %+v, want only %s's lock", round, i, page.Locks, winners[0])
			}
		}
	}
}

// An event stream on any node sees the commits of every node.
func TestNodesEventsReachEveryNode(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := make([]chan string, len(nodes)) // keys each node's stream delivered
	for i, n := range nodes {
		s, err := newClient(t, n.url).Events(ctx, "evt/", "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		seen[i] = make(chan string, 1000)
		go func() {
			for s.Next() {
				seen[i] <- s.Entry().Lock.Key
			}
		}()
	}
	// A node hears others once its LISTEN connection is up, which may be
	// just after /readyz said yes: wait for a first commit from each node
	// to reach every other node, with fresh keys, then demand every later
	// one.
	await := func(i int, key string, within time.Duration) bool {
		timeout := time.After(within)
		for {
			select {
			case k := <-seen[i]:
				if k == key {
					return true
				}
			case <-timeout:
				return false
			case <-ctx.Done():
				return false
			}
		}
	}
	for from, n := range nodes {
		c := newClient(t, n.url)
		for attempt := 0; ; attempt++ {
			key := fmt.Sprintf("evt/warm-%d-%d", from, attempt)
			if _, err := acquire(c, key, "warm"); err != nil {
				t.Fatal(err)
			}
			all := true
			for to := range nodes {
				all = await(to, key, time.Second) && all
			}
			if all {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("node %d's commits never reached every node", from)
			}
		}
	}
	for from, n := range nodes {
		key := fmt.Sprintf("evt/key-%d", from)
		if _, err := acquire(newClient(t, n.url), key, fmt.Sprintf("s%d", from)); err != nil {
			t.Fatal(err)
		}
		for to := range nodes {
			if !await(to, key, 10*time.Second) {
				t.Fatalf("the grant of %s on node %d never reached node %d's event stream", key, from, to)
			}
		}
	}

	// Concurrent commits on every node reach each stream in an order of
	// their own, not always their IDs' (drawn before commit): each
	// arrives all the same, once.
	const callers, each = 4, 25
	want := map[string]bool{}
	var wg sync.WaitGroup
	for from, n := range nodes {
		c := newClient(t, n.url)
		for caller := range callers {
			keys := make([]string, each)
			for i := range keys {
				keys[i] = fmt.Sprintf("evt/burst-%d-%d-%d", from, caller, i)
				want[keys[i]] = true
			}
			wg.Go(func() {
				for _, key := range keys {
					if _, err := acquire(c, key, fmt.Sprintf("burst-%d-%d", from, caller)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for to := range nodes {
		got := map[string]int{}
		timeout := time.After(20 * time.Second)
		for len(got) < len(want) {
			select {
			case k := <-seen[to]:
				if !want[k] {
					continue
				}
				if got[k]++; got[k] > 1 {
					t.Fatalf("node %d's stream delivered %s twice", to, k)
				}
			case <-timeout:
				var missing []string
				for k := range want {
					if got[k] == 0 {
						missing = append(missing, k)
					}
				}
				t.Fatalf("node %d's stream never delivered %d of the %d concurrent grants, such as %v", to, len(missing), len(want), missing[:min(3, len(missing))])
			}
		}
	}
}

// Killing a node with SIGKILL under load loses nothing it acknowledged:
// the surviving nodes list every grant any node confirmed.
func TestNodesKillOneLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3)
	var (
		mu    sync.Mutex
		acked = map[string]uint64{} // key → token
		wg    sync.WaitGroup
		kill  sync.Once
	)
	const workers, perWorker = 12, 25
	killed := make(chan struct{})
	for w := range workers {
		c := newClient(t, nodes[w%len(nodes)].url)
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("kill/%d-%d", w, i)
				res, err := acquire(c, key, fmt.Sprintf("w%d", w))
				if err != nil {
					continue // unacknowledged: the node may have died with it
				}
				mu.Lock()
				acked[key] = res.Locks[0].Token
				n := len(acked)
				mu.Unlock()
				if n >= workers*perWorker/3 && w%len(nodes) != 0 {
					kill.Do(func() {
						nodes[0].cmd.Process.Signal(syscall.SIGKILL)
						close(killed)
					})
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatal("the load ended before node 0 was killed")
	}
	nodes[0].kill()
	if len(acked) < workers*perWorker/2 {
		t.Fatalf("only %d of %d grants were acknowledged; the surviving nodes should have served most", len(acked), workers*perWorker)
	}
	for _, n := range nodes[1:] {
		page, err := newClient(t, n.url).Locks(context.Background(), holdfast.LockQuery{Prefix: "kill", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]uint64{}
		for _, l := range page.Locks {
			held[l.Key] = l.Token
		}
		for key, token := range acked {
			if held[key] != token {
				t.Fatalf("%s: acknowledged with token %d, node lists token %d", key, token, held[key])
			}
		}
	}
}

// While PostgreSQL is unreachable the server answers at once with 503
// unavailable and Retry-After, /readyz says 503, nothing is granted; it
// serves again by itself when the database is back.
func TestNodeUnreachableDatabase(t *testing.T) {
	t.Parallel()
	proxy, dsn, schema := databaseBehindProxy(t)
	node := startNode(t, dsn, schema)
	c := newClient(t, node.url)
	if _, err := acquire(c, "policy/1", "before"); err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	for i := range 5 {
		start := time.Now()
		_, err := acquire(c, "policy/1", fmt.Sprintf("during-%d", i))
		var un *holdfast.UnavailableError
		if !errors.As(err, &un) {
			t.Fatalf("acquire with the database gone: %v, want 503 unavailable", err)
		}
		if un.RetryAfter <= 0 {
			t.Errorf("503 without Retry-After: %+v", un)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("the refusal took %s; it should not wait on the database", d)
		}
	}
	if code, h := get(node.url + "/readyz"); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("/readyz with the database gone: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
	}
	if code, _ := get(node.url + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with the database gone: %d, want 200 (the process is alive)", code)
	}

	proxy.Restore()
	servesAgain(t, node, c, "policy/2")
}

// databaseBehindProxy migrates a schema and returns a DSN whose
// connections go through a proxy the test can cut or stall.
func databaseBehindProxy(t *testing.T) (proxy *tcpproxy.Proxy, dsn, schema string) {
	t.Helper()
	dsn = pgtest.SharedDSN(t)
	schema = migratedSchema(t, dsn)
	proxy, dsn = pgtest.BehindProxy(t, dsn)
	return proxy, dsn, schema
}

// servesAgain waits until node is ready again after an outage, then
// checks that policy/1, granted to session "before" before it, is still
// held, and that free, a key nobody holds, is granted.
func servesAgain(t *testing.T, node *serveProcess, c *client.Client, free string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _ := get(node.url + "/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d 20s after the store answered again", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := acquire(c, "policy/1", "after")
	var locked *holdfast.LockedError
	if !errors.As(err, &locked) || len(locked.Conflicts) != 1 || len(locked.Conflicts[0].Holders) != 1 ||
		locked.Conflicts[0].Holders[0].Owner.Session != "before" {
		t.Fatalf("acquire after the outage: %v; want it refused, held by the session granted before it", err)
	}
	if _, err := acquire(c, free, "after"); err != nil {
		t.Fatalf("acquire of a free key after the outage: %v", err)
	}
}

// While PostgreSQL stops answering without closing its connections (a
// network partition, a hung host), requests end with 503 unavailable and
// Retry-After once --store-timeout has passed, saying so, rather than
// when their clients give up; /readyz says 503; the server serves again
// by itself once the database answers.
func TestNodeHungDatabase(t *testing.T) {
	t.Parallel()
	proxy, dsn, schema := databaseBehindProxy(t)
	node := startServe(t, dsn, "--schema", schema, "--sweep-interval", "50ms", "--log-level", "warn", "--store-timeout", "500ms")
	c := newClient(t, node.url)
	if _, err := acquire(c, "policy/1", "before"); err != nil {
		t.Fatal(err)
	}

	proxy.Stall()
	defer proxy.Restore()
	// Many callers at once: while the first groups' transactions hang,
	// the others queue behind them, and give up as the store did.
	var wg sync.WaitGroup
	errs := make([]error, 200)
	took := make([]time.Duration, len(errs))
	for i := range errs {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = acquire(c, fmt.Sprintf("policy/%d", i), fmt.Sprintf("during-%d", i))
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, err := range errs {
		var un *holdfast.UnavailableError
		// Those whose transaction hung say the store did not answer in
		// time; those queued behind hung ones, that they waited too long.
		if !errors.As(err, &un) || un.RetryAfter <= 0 || !strings.Contains(err.Error(), "500ms") {
			t.Errorf("acquire %d with the database hung: %v, want 503 unavailable with Retry-After naming --store-timeout", i, err)
		}
	}
	slices.Sort(took)
	t.Logf("503s after %v at the median, %v at the longest", took[len(took)/2], took[len(took)-1])
	if code, h := get(node.url + "/readyz"); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("/readyz with the database hung: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
	}

	proxy.Restore()
	servesAgain(t, node, c, "policy/free")
}

// A real restart of PostgreSQL under a running holdfast serve, once by a
// fast shutdown and once by a crash (immediate): while the database is
// down, requests get 503 unavailable with Retry-After and /readyz says
// 503; the same process serves again by itself once the database is back,
// and the grant it acknowledged before is still held.
func TestNodeDatabaseRestart(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t)
	node := startNode(t, db.DSN(), migratedSchema(t, db.DSN()))
	c := newClient(t, node.url)
	for i, mode := range []pgtest.Mode{pgtest.Fast, pgtest.Immediate} {
		key, free := fmt.Sprintf("policy/restart-%d", i), fmt.Sprintf("policy/free-%d", i)
		if _, err := acquire(c, key, "before"); err != nil {
			t.Fatal(err)
		}

		db.Stop(mode)
		for _, k := range []string{key, free} {
			_, err := acquire(c, k, "during")
			var un *holdfast.UnavailableError
			if !errors.As(err, &un) || un.RetryAfter <= 0 {
				t.Fatalf("%s stop: acquire of %s: %v; want 503 unavailable with Retry-After", mode, k, err)
			}
		}
		if code, h := get(node.url + "/readyz"); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("%s stop: /readyz %d, Retry-After %q; want 503 with Retry-After", mode, code, h.Get("Retry-After"))
		}

		db.Start()
		deadline := time.Now().Add(30 * time.Second)
		for code, _ := get(node.url + "/readyz"); code != http.StatusOK; code, _ = get(node.url + "/readyz") {
			if time.Now().After(deadline) {
				t.Fatalf("%s stop: /readyz still %d 30s after the database started again\n%s", mode, code, node.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := node.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("%s stop: holdfast serve is gone: %v", mode, err)
		}
		_, err := acquire(c, key, "after")
		var locked *holdfast.LockedError
		if !errors.As(err, &locked) || len(locked.Conflicts) != 1 || len(locked.Conflicts[0].Holders) != 1 ||
			locked.Conflicts[0].Holders[0].Owner.Session != "before" {
			t.Fatalf("%s stop: acquire after the restart: %v; want it refused, held by the session granted before it", mode, err)
		}
		if _, err := acquire(c, free, "after"); err != nil {
			t.Fatalf("%s stop: acquire of a free key after the restart: %v", mode, err)
		}
	}
}

// A server over PostgreSQL raises the token sequence to --token-floor
// before it serves, and /metrics reports its connection pool.
func TestNodeTokenFloorAndPoolMetrics(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedDSN(t)
	schema := migratedSchema(t, dsn)
	const floor = 5000
	n := startServe(t, dsn, "--schema", schema, "--token-floor", fmt.Sprint(floor))
	res, err := acquire(newClient(t, n.url), "policy/1", "s-ada")
	if err != nil {
		t.Fatal(err)
	}
	if tok := res.Locks[0].Token; tok <= floor {
		t.Fatalf("first grant after --token-floor %d: token %d, want above it", floor, tok)
	}
	m := scrapeMetrics(t, n.url)
	if m["holdfast_pg_pool_max_connections"] < 1 || m["holdfast_pg_pool_acquires_total"] < 1 ||
		m[`holdfast_pg_pool_connections{state="idle"}`]+m[`holdfast_pg_pool_connections{state="acquired"}`] < 1 {
		t.Fatalf("pool metrics after a grant: max %g, acquires %g, idle %g, acquired %g; want a pool that was used",
			m["holdfast_pg_pool_max_connections"], m["holdfast_pg_pool_acquires_total"],
			m[`holdfast_pg_pool_connections{state="idle"}`], m[`holdfast_pg_pool_connections{state="acquired"}`])
	}
	if _, ok := m["holdfast_pg_pool_waited_acquires_total"]; !ok {
		t.Error("no holdfast_pg_pool_waited_acquires_total")
	}
	if _, ok := m["holdfast_pg_pool_acquire_seconds_total"]; !ok {
		t.Error("no holdfast_pg_pool_acquire_seconds_total")
	}
}
