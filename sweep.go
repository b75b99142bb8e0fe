package holdfast

import (
	"context"
	"time"

	"github.com/holdfast/holdfast/store"
)

// sweepBatch bounds the work of one sweep transaction, so that a mass
// expiry never holds the store for long.
const sweepBatch = 100

// expiredBatch is sweepBatch for expired locks, which a mass expiry brings
// by the million. Each sweep transaction waits for its commit, so the
// batch also paces their sweep, which competes with the acquires running
// meanwhile: with 100, the scale benchmark's sweep of a million expired
// locks took about 7 s and those acquires' p99 was 1.7-2.4x their p99
// without it; with 25, about 13 s and 1.4-1.9x (docs/BENCHMARKS-HISTORY.md).
// Expired locks are free at once either way; the sweep only removes them.
const expiredBatch = 25

// forgetBatch is how many live sessions one sweep looks at for sessions to
// forget: reading a session is cheap, and deleting one is rare.
const forgetBatch = 1000

func (m *Manager) sweepLoop() {
	defer m.swept.Done()
	t := time.NewTicker(m.cfg.SweepInterval)
	defer t.Stop()
	// Each sweep looks at one batch of live sessions for ones to forget,
	// and the next goes on from there: a million sessions take a thousand
	// sweeps, never one long one.
	var after string
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*m.cfg.SweepInterval+10*time.Second)
			if err := m.sweep(ctx, &after, false); err != nil {
				m.cfg.Logger.Warn("sweep failed", "error", err)
			}
			cancel()
		}
	}
}

// Sweep removes expired locks, ends idle sessions, forgets lost locks and
// ended sessions past their retention, forgets sessions without an idle
// timeout that hold no lock and were not seen for as long, and prunes the
// audit log. Expiry does not depend on it: an expired lock is free at
// once. It is safe to run on several servers sharing one store at the
// same time.
func (m *Manager) Sweep(ctx context.Context) error {
	var after string
	return m.sweep(ctx, &after, true)
}

// sweep runs each step until it has nothing left to do (a step says
// whether it filled its batch, so that there may be more), except the search
// for sessions to forget: that looks at the live sessions after *after
// and moves *after on, through all of them if whole is set, else through
// one batch.
func (m *Manager) sweep(ctx context.Context, after *string, whole bool) error {
	forget := func(o *op) (bool, error) {
		n, err := m.sweepForgotten(o, after)
		return whole && n == forgetBatch, err
	}
	steps := []func(o *op) (more bool, err error){
		m.sweepExpiredLocks, m.sweepIdleSessions, m.sweepLost, m.sweepEndedSessions, forget, m.sweepAudit,
	}
	for _, step := range steps {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var more bool
			err := m.update(ctx, "sweep", scope{}, func(o *op) (err error) {
				more, err = step(o)
				return err
			})
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	return nil
}

func (m *Manager) sweepExpiredLocks(o *op) (bool, error) {
	locks, err := o.tx.ExpiredLocks(o.now, expiredBatch)
	if err != nil {
		return false, err
	}
	for _, l := range locks {
		if err := o.dropDead(l, LostExpired); err != nil {
			return false, err
		}
	}
	return len(locks) == expiredBatch, nil
}

func (m *Manager) sweepIdleSessions(o *op) (bool, error) {
	sessions, err := o.tx.IdleSessions(o.now, sweepBatch)
	if err != nil {
		return false, err
	}
	ended := 0
	for _, s := range sessions {
		// The store lists sessions by their recorded deadlines; within the
		// restart grace some of them are still live (see idleDeadline).
		// More than a batch of those ahead of a session that is due delays
		// its end until the grace is over; its locks are free at once all
		// the same.
		if !o.idle(s) {
			continue
		}
		if _, err := o.endSession(s, LostSessionExpired); err != nil {
			return false, err
		}
		ended++
	}
	return ended == sweepBatch, nil
}

func (m *Manager) sweepLost(o *op) (bool, error) {
	lost, err := o.tx.LostBefore(o.now.Add(-m.cfg.LostRetention), sweepBatch)
	if err != nil {
		return false, err
	}
	for _, l := range lost {
		if err := o.tx.DeleteLost(l.Lock.Session, l.Lock.Key, l.Lock.Token); err != nil {
			return false, err
		}
	}
	return len(lost) == sweepBatch, nil
}

func (m *Manager) sweepEndedSessions(o *op) (bool, error) {
	ended, err := o.tx.EndedSessions(o.now.Add(-m.cfg.LostRetention), sweepBatch)
	if err != nil {
		return false, err
	}
	for _, s := range ended {
		if err := o.tx.DeleteSession(s.ID); err != nil {
			return false, err
		}
	}
	return len(ended) == sweepBatch, nil
}

func (m *Manager) sweepAudit(o *op) (bool, error) {
	n, err := o.tx.PruneAudit(o.now.Add(-m.cfg.AuditRetention), sweepBatch)
	return n >= sweepBatch, err
}

// sweepForgotten forgets live sessions that have no idle timeout, hold no
// lock and were last seen longer ago than the lost-lock retention: nothing
// else would ever remove them, and one that comes back is started anew.
// It looks at up to forgetBatch sessions after *after, moves *after on
// (back to the start after the last), and reports how many it looked at.
func (m *Manager) sweepForgotten(o *op, after *string) (int, error) {
	sessions, err := o.tx.Sessions(store.SessionQuery{After: *after, Limit: forgetBatch})
	if err != nil {
		return 0, err
	}
	seenBefore := o.now.Add(-m.cfg.LostRetention)
	forgettable := func(s store.Session) bool {
		return !s.Ended() && s.IdleTimeout == 0 && s.LastSeen.Before(seenBefore)
	}
	for _, listed := range sessions {
		if !forgettable(listed) {
			continue
		}
		// Read again, as every other change of a session starts: a store
		// may list sessions without the guard it keeps on one.
		s, ok, err := o.session(listed.ID)
		if err != nil {
			return 0, err
		}
		if !ok || !forgettable(s) {
			continue
		}
		locks, err := o.tx.SessionLocks(s.ID)
		if err != nil {
			return 0, err
		}
		if len(locks) > 0 {
			continue
		}
		if err := o.tx.DeleteSession(s.ID); err != nil {
			return 0, err
		}
	}
	if len(sessions) < forgetBatch {
		*after = ""
	} else {
		*after = sessions[len(sessions)-1].ID
	}
	return len(sessions), nil
}
