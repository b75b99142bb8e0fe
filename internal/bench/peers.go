package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// The peers are what users would write themselves instead of holdfast,
// each at the durability holdfast gives: nothing is acknowledged before
// it is on disk.

// pgTarget is a hand-rolled lock table in PostgreSQL with
// synchronous_commit on: insert if absent, delete if owned.
type pgTarget struct {
	pool *pgxpool.Pool
	// The statements, built once: the client's work in the measured loop
	// is only the call.
	insert, delete string
}

// runID tells this run's tables, schemas and keys from those of any
// other run on a shared database or Redis: the pid alone repeats across
// machines and reboots, the pid and the start time do not.
var runID = fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano())

// pgTable is the lock table's name: a run's own, so that runs at the same
// time on one database do not drop or share each other's.
var pgTable = "holdfast_bench_locks_" + runID

func newPGTarget(ctx context.Context, dsn string, conns int) (*pgTarget, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres peer: %w", err)
	}
	cfg.MaxConns = int32(conns)
	// Connections left idle once the lock table's rows are done go soon:
	// the holdfast server over the same database needs as many of them
	// for its own rows, within PostgreSQL's max_connections.
	cfg.MaxConnIdleTime, cfg.HealthCheckPeriod = time.Second, 500*time.Millisecond
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres peer: %w", err)
	}
	_, err = pool.Exec(ctx, `DROP TABLE IF EXISTS `+pgTable+`;
		CREATE TABLE `+pgTable+` (key text PRIMARY KEY, owner text NOT NULL,
			acquired_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)`)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres peer: creating %s: %w", pgTable, err)
	}
	return &pgTarget{pool: pool,
		insert: `INSERT INTO ` + pgTable + ` (key, owner, expires_at)
			SELECT k, $2, now() + $3 * interval '1 second' FROM unnest($1::text[]) AS k
			ON CONFLICT (key) DO NOTHING`,
		delete: `DELETE FROM ` + pgTable + ` WHERE key = ANY($1) AND owner = $2`,
	}, nil
}

func (t *pgTarget) acquire(ctx context.Context, owner string, keys []string) (bool, error) {
	if len(keys) == 1 {
		tag, err := t.pool.Exec(ctx, t.insert, keys, owner, lockTTL.Seconds())
		return err == nil && tag.RowsAffected() == 1, err
	}
	// All or nothing: keep the rows only if every key was free.
	granted := false
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, t.insert, keys, owner, lockTTL.Seconds())
		if err != nil {
			return err
		}
		if granted = tag.RowsAffected() == int64(len(keys)); !granted {
			return errNotGranted
		}
		return nil
	})
	if err == errNotGranted {
		return false, nil
	}
	return granted, err
}

var errNotGranted = fmt.Errorf("not granted")

func (t *pgTarget) release(ctx context.Context, owner string, keys []string) error {
	_, err := t.pool.Exec(ctx, t.delete, keys, owner)
	return err
}

func (t *pgTarget) close() error {
	t.pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+pgTable)
	t.pool.Close()
	return nil
}

// redisTarget is SET NX PX with a compare-and-delete script, on a Redis
// started with appendonly yes and appendfsync always. Its keys begin with
// keyPrefix, put there by the workloads outside the timed calls.
type redisTarget struct {
	rdb *redis.Client
}

// keyPrefix begins the keys of the peers shared between runs, Redis and
// etcd: the run's own, so that no run meets the keys another left held.
var keyPrefix = "holdfast-bench/" + runID + "/"

// Both scripts run atomically in Redis.
var (
	redisAcquireMany = redis.NewScript(`
for i, k in ipairs(KEYS) do
  if redis.call('EXISTS', k) == 1 then return 0 end
end
for i, k in ipairs(KEYS) do
  redis.call('SET', k, ARGV[1], 'PX', ARGV[2])
end
return 1`)
	redisRelease = redis.NewScript(`
local n = 0
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then n = n + redis.call('DEL', k) end
end
return n`)
)

func newRedisTarget(ctx context.Context, addr string, clients int) (*redisTarget, error) {
	// Checked on one connection first: the pool below dials all of its
	// idle connections at once, and each failure would be logged.
	if err := checkRedis(ctx, addr); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: clients + 4, MinIdleConns: clients})
	return &redisTarget{rdb: rdb}, nil
}

// checkRedis refuses a Redis that is not durable as the other systems are.
func checkRedis(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1})
	defer rdb.Close()
	cfg, err := rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return fmt.Errorf("redis peer: %w", err)
	}
	if cfg["appendfsync"] != "always" || cfg["appendonly"] != "yes" {
		return fmt.Errorf("redis peer runs appendonly %q appendfsync %q: start it with --appendonly yes --appendfsync always for equal durability",
			cfg["appendonly"], cfg["appendfsync"])
	}
	return nil
}

func (t *redisTarget) acquire(ctx context.Context, owner string, keys []string) (bool, error) {
	if len(keys) == 1 {
		return t.rdb.SetNX(ctx, keys[0], owner, lockTTL).Result()
	}
	n, err := redisAcquireMany.Run(ctx, t.rdb, keys, owner, lockTTL.Milliseconds()).Int()
	return n == 1, err
}

func (t *redisTarget) release(ctx context.Context, owner string, keys []string) error {
	return redisRelease.Run(ctx, t.rdb, keys, owner).Err()
}

func (t *redisTarget) close() error { return t.rdb.Close() }

// etcdTarget puts a key only if it was never created (create_revision 0),
// attached to the owner's lease, and deletes it only if its value is the
// owner: etcd's own lock recipe, in one transaction each. It speaks etcd's
// v3 JSON gateway over HTTP/1.1, the transport every other row uses, so
// that no gRPC stack enters holdfast's dependencies; a gRPC client would
// spend less CPU per request.
type etcdTarget struct {
	url    string
	http   *http.Client
	ttl    time.Duration // of each lease
	mu     sync.Mutex
	leases map[string]string // owner → lease ID, for the row being measured
}

// newEtcdTarget connects to the member at addr. Each owner's lease lasts
// ttl from its first acquire of a row: nothing keeps it alive, so ttl must
// be longer than a row.
func newEtcdTarget(ctx context.Context, addr string, clients int, ttl time.Duration) (*etcdTarget, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = clients+16, clients+16
	t := &etcdTarget{url: "http://" + addr, http: &http.Client{Transport: tr}, ttl: ttl, leases: map[string]string{}}
	var status map[string]any
	if err := t.call(ctx, "/v3/maintenance/status", map[string]any{}, &status); err != nil {
		return nil, fmt.Errorf("etcd peer: %w", err)
	}
	return t, nil
}

func (t *etcdTarget) call(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, out)
}

func (t *etcdTarget) lease(ctx context.Context, owner string) (string, error) {
	t.mu.Lock()
	id, ok := t.leases[owner]
	t.mu.Unlock()
	if ok {
		return id, nil
	}
	var res struct {
		ID string `json:"ID"`
	}
	if err := t.call(ctx, "/v3/lease/grant", map[string]any{"TTL": int(t.ttl.Seconds())}, &res); err != nil {
		return "", err
	}
	t.mu.Lock()
	t.leases[owner] = res.ID
	t.mu.Unlock()
	return res.ID, nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func (t *etcdTarget) acquire(ctx context.Context, owner string, keys []string) (bool, error) {
	lease, err := t.lease(ctx, owner)
	if err != nil {
		return false, err
	}
	compare := make([]map[string]any, len(keys))
	success := make([]map[string]any, len(keys))
	for i, k := range keys {
		compare[i] = map[string]any{"key": b64(k), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
		success[i] = map[string]any{"request_put": map[string]any{"key": b64(k), "value": b64(owner), "lease": lease}}
	}
	var res struct {
		Succeeded bool `json:"succeeded"`
	}
	err = t.call(ctx, "/v3/kv/txn", map[string]any{"compare": compare, "success": success}, &res)
	return res.Succeeded, err
}

func (t *etcdTarget) release(ctx context.Context, owner string, keys []string) error {
	compare := make([]map[string]any, len(keys))
	success := make([]map[string]any, len(keys))
	for i, k := range keys {
		compare[i] = map[string]any{"key": b64(k), "target": "VALUE", "result": "EQUAL", "value": b64(owner)}
		success[i] = map[string]any{"request_delete_range": map[string]any{"key": b64(k)}}
	}
	var res map[string]any
	return t.call(ctx, "/v3/kv/txn", map[string]any{"compare": compare, "success": success}, &res)
}

// endRow revokes the row's leases, which deletes any key a request cut off
// at the row's end left held, so that the next row's leases are new and
// none expires while it is measured.
func (t *etcdTarget) endRow() {
	t.mu.Lock()
	leases := t.leases
	t.leases = map[string]string{}
	t.mu.Unlock()
	for _, id := range leases {
		var res map[string]any
		t.call(context.Background(), "/v3/lease/revoke", map[string]any{"ID": id}, &res)
	}
}

func (t *etcdTarget) close() error {
	t.endRow()
	return nil
}
