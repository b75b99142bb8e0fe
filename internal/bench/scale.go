package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// scaleKeysPerSession is how many locks each filling session holds.
const scaleKeysPerSession = 1000

// listClients is how many clients list locks at once in the scale workload.
const listClients = 4

// scale fills the started holdfast server with many held locks, then
// reports its memory, its restart-to-ready time, the p99 of a prefix
// listing, and the acquire p99 while a sweep expires every one of them,
// next to the acquire p99 without it.
func (r *runner) scale(ctx context.Context) ([]row, error) {
	note := func(what string, args ...any) row {
		return row{workload: "scale", system: r.holdfast, mode: what, note: fmt.Sprintf(args[0].(string), args[1:]...)}
	}
	if r.serverProc == nil || r.cfg.Store != "" {
		r.logf("skipping scale: it restarts the server, so it runs only on the embedded store the bench starts itself")
		return nil, nil
	}
	n := r.cfg.ScaleLocks
	sessions := (n + scaleKeysPerSession - 1) / scaleKeysPerSession

	r.logf("scale: filling %d locks…", n)
	start := time.Now()
	if err := r.fill(ctx, n, sessions); err != nil {
		return nil, err
	}
	fillTook := time.Since(start)
	rows := []row{note("fill", "%d locks held, filled in %s (%.0f locks/s)", n, fillTook.Round(time.Millisecond), float64(n)/fillTook.Seconds())}
	if rss, ok := rssBytes(r.serverProc.pid); ok {
		rows = append(rows, note("memory", "RSS %.0f MiB with %d locks held", float64(rss)/(1<<20), n))
	}

	r.logf("scale: restarting…")
	took, err := r.restart(ctx)
	if err != nil {
		return nil, err
	}
	rows = append(rows, note("restart", "ready %s after start, with %d locks", took.Round(time.Millisecond), n))
	if rss, ok := rssBytes(r.serverProc.pid); ok {
		rows = append(rows, note("memory after restart", "RSS %.0f MiB", float64(rss)/(1<<20)))
	}

	// Listings are measured for their latency, by a few clients: 64
	// clients each fetching 100 locks at once would measure the queue.
	r.logf("scale: prefix listings…")
	list, err := r.measure(ctx, r.holdfast, min(listClients, r.cfg.Clients), func(ctx context.Context, c int, lat *[]time.Duration) (int, error) {
		prefix := fmt.Sprintf("scale/%d/", rand.IntN(sessions))
		return 1, timed(lat, func() error {
			_, err := r.holdfast.t.(*httpTarget).c.Locks(ctx, holdfast.LockQuery{Prefix: prefix, Limit: 100})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	list.workload, list.system, list.mode = "scale", r.holdfast, fmt.Sprintf("GET /v1/locks?prefix= (100 a page, %d clients)", min(listClients, r.cfg.Clients))
	list.unit = "pages/s"
	rows = append(rows, list)

	r.logf("scale: acquire without expiry…")
	quiet, err := r.cycle(ctx, r.holdfast)
	if err != nil {
		return nil, err
	}
	quiet.workload, quiet.system, quiet.mode, quiet.unit = "scale", r.holdfast, "acquire+release, no expiry", "cycles/s"
	rows = append(rows, quiet)

	r.logf("scale: acquire while all %d locks expire…", n)
	// Earlier workloads' clients were cut off mid-operation, some holding
	// locks for minutes: end their sessions, so that the store holds the
	// scale locks and what else is left is counted.
	if err := r.endClientSessions(ctx); err != nil {
		return nil, err
	}
	held, err := storedLocks(ctx, r.serverProc.url)
	if err != nil {
		return nil, err
	}
	others := max(held-n, 0)
	if err := r.expireSoon(ctx, sessions); err != nil {
		return nil, err
	}
	expired := time.Now().Add(scaleExpiry) // the last renewed lock's expiry
	// The sweep is watched while the acquires run, as it may end first.
	stop, watched := make(chan struct{}), make(chan sweepWatch, 1)
	go func() { watched <- watchSweep(ctx, r.serverProc.url, others, r.liveCycleLocks, stop) }()
	during, err := r.cycle(ctx, r.holdfast)
	if err != nil {
		close(stop)
		<-watched
		return nil, err
	}
	during.workload, during.system, during.mode, during.unit = "scale", r.holdfast, "acquire+release during mass expiry", "cycles/s"
	rows = append(rows, during)
	giveUp := time.AfterFunc(time.Minute, func() { close(stop) })
	defer giveUp.Stop()
	w := <-watched
	if w.err == nil && w.left == 0 {
		// The cycle's locks came and went between the two reads of each
		// look; now that they are still, look once more.
		if left, err := unswept(ctx, r.serverProc.url, r.liveCycleLocks); err != nil {
			w.err = err
		} else if left > others {
			w = watchSweep(ctx, r.serverProc.url, others, r.liveCycleLocks, stop)
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	msg := fmt.Sprintf("all %d expired locks swept %s after the last one expired", n, max(w.at.Sub(expired), 0).Round(time.Millisecond))
	if w.left > 0 {
		msg = fmt.Sprintf("%d expired locks not yet swept a minute after the cycle ended", w.left)
	}
	rows = append(rows, note("sweep", msg))
	if quiet.p99 > 0 {
		rows = append(rows, note("expiry cost", "acquire p99 during mass expiry ÷ without = %.2f×", float64(during.p99)/float64(quiet.p99)))
	}
	return rows, nil
}

func (r *runner) client() *client.Client { return r.holdfast.t.(*httpTarget).c }

// liveCycleLocks counts the locks the cycle workload's clients hold: a
// request cut off at the end of a row may still be granted after their
// sessions ended.
func (r *runner) liveCycleLocks(ctx context.Context) (int, error) {
	q := holdfast.LockQuery{Prefix: r.holdfast.key("cycle/"), Limit: 1000}
	n := 0
	for {
		page, err := r.client().Locks(ctx, q)
		if err != nil {
			return 0, err
		}
		n += len(page.Locks)
		if page.Next == nil {
			return n, nil
		}
		q.After = *page.Next
	}
}

// endClientSessions ends the sessions of the workloads' clients, which
// releases whatever locks they were cut off holding.
func (r *runner) endClientSessions(ctx context.Context) error {
	for c := range r.cfg.Clients {
		if _, err := r.client().EndSession(ctx, holdfast.EndSessionRequest{Session: owner(c)}); err != nil {
			return err
		}
	}
	return nil
}

// fill acquires n keys, scaleKeysPerSession per request, from every client.
func (r *runner) fill(ctx context.Context, n, sessions int) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	for range r.cfg.Clients {
		wg.Go(func() {
			for {
				s := int(next.Add(1)) - 1
				if s >= sessions || ctx.Err() != nil {
					return
				}
				keys := make([]string, 0, scaleKeysPerSession)
				for k := s * scaleKeysPerSession; k < min(n, (s+1)*scaleKeysPerSession); k++ {
					keys = append(keys, fmt.Sprintf("scale/%d/%d", s, k))
				}
				_, err := r.client().Acquire(ctx, holdfast.AcquireRequest{Keys: keys,
					Owner: holdfast.Owner{Session: fmt.Sprintf("scale-%d", s), User: "scale"}, TTL: holdfast.Duration(time.Hour)})
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// restart stops the server and starts it again on the same store, and
// returns how long it took from start to ready.
func (r *runner) restart(ctx context.Context) (time.Duration, error) {
	old := r.serverProc
	old.stop()
	start := time.Now()
	// The same arguments, less the --listen ADDR that start appends.
	args := old.cmd.Args[1 : len(old.cmd.Args)-2]
	p, err := r.start(ctx, "holdfast serve", r.cfg.Executable, args...)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	c, err := newHTTPClient(p.url, r.cfg.Clients, 0)
	if err != nil {
		return 0, err
	}
	r.serverProc, r.holdfast.server, r.holdfast.t = p, p, &httpTarget{c}
	return took, nil
}

func waitReady(ctx context.Context, url string) error {
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// scaleExpiry is the TTL expireSoon renews the scale locks to.
const scaleExpiry = time.Second

// expireSoon renews every filling session's locks to expire after
// scaleExpiry, a few sessions per batch: the answer lists every renewed
// lock.
func (r *runner) expireSoon(ctx context.Context, sessions int) error {
	const perBatch = 10
	for i := 0; i < sessions; i += perBatch {
		var ops []client.Op
		for s := i; s < min(sessions, i+perBatch); s++ {
			ops = append(ops, client.RenewOp(holdfast.RenewRequest{Session: fmt.Sprintf("scale-%d", s), TTL: holdfast.Duration(scaleExpiry)}))
		}
		results, err := r.client().Batch(ctx, ops)
		if err != nil {
			return err
		}
		for _, res := range results {
			if res.Err != nil {
				return res.Err
			}
		}
	}
	return nil
}

// sweepWatch is what watchSweep saw.
type sweepWatch struct {
	at   time.Time // when the store held no more lock records than others
	left int       // how many more it held when told to stop
	err  error
}

// sweepPoll is how often watchSweep reads /metrics, which costs the
// measured server a little each time.
const sweepPoll = 200 * time.Millisecond

// watchSweep reads the lock records of the store of the server at base
// until, less the live locks that live counts, they are no more than
// others, or until stop is closed. Listings cannot tell: they leave out
// expired locks whether or not the sweep has removed them.
func watchSweep(ctx context.Context, base string, others int, live func(context.Context) (int, error), stop <-chan struct{}) sweepWatch {
	for {
		n, err := unswept(ctx, base, live)
		if err != nil {
			return sweepWatch{err: err}
		}
		if n <= others {
			return sweepWatch{at: time.Now()}
		}
		select {
		case <-ctx.Done():
			return sweepWatch{err: ctx.Err()}
		case <-stop:
			return sweepWatch{left: n - others}
		case <-time.After(sweepPoll):
		}
	}
}

// unswept reads the lock records of the store of the server at base, less
// the live locks that live counts.
func unswept(ctx context.Context, base string, live func(context.Context) (int, error)) (int, error) {
	n, err := storedLocks(ctx, base)
	if err != nil {
		return 0, err
	}
	l, err := live(ctx)
	return n - l, err
}

// lockRecordsMetric is the series of /metrics that counts the lock
// records an embedded store holds, expired ones not yet swept included.
const lockRecordsMetric = `holdfast_store_records{kind="locks"} `

// storedLocks reads lockRecordsMetric from the server at base.
func storedLocks(ctx context.Context, base string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a server that stopped answering
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), lockRecordsMetric); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("GET /metrics: %s: %w", lockRecordsMetric, err)
			}
			return int(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("GET /metrics: the server exports no %s", strings.TrimSpace(lockRecordsMetric))
}
