package holdfast

import (
	"context"
	"time"
)

// sweepBatch bounds the work of one sweep transaction, so that a mass
// expiry never holds the store for long.
const sweepBatch = 100

func (m *Manager) sweepLoop() {
	defer m.swept.Done()
	t := time.NewTicker(m.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*m.cfg.SweepInterval+10*time.Second)
			if err := m.Sweep(ctx); err != nil {
				m.cfg.Logger.Warn("sweep failed", "err", err)
			}
			cancel()
		}
	}
}

// Sweep removes expired locks, ends idle sessions, forgets lost locks and
// ended sessions past their retention, and prunes the audit log. Expiry
// does not depend on it: an expired lock is free at once. It is safe to run
// on several servers sharing one store at the same time.
func (m *Manager) Sweep(ctx context.Context) error {
	steps := []func(o *op) (int, error){
		m.sweepExpiredLocks, m.sweepIdleSessions, m.sweepLost, m.sweepEndedSessions, m.sweepAudit,
	}
	for _, step := range steps {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var n int
			err := m.update(ctx, "sweep", scope{}, func(o *op) (err error) {
				n, err = step(o)
				return err
			})
			if err != nil {
				return err
			}
			if n < sweepBatch {
				break
			}
		}
	}
	return nil
}

func (m *Manager) sweepExpiredLocks(o *op) (int, error) {
	locks, err := o.tx.ExpiredLocks(o.now, sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, l := range locks {
		if err := o.dropDead(l, LostExpired); err != nil {
			return 0, err
		}
	}
	return len(locks), nil
}

func (m *Manager) sweepIdleSessions(o *op) (int, error) {
	sessions, err := o.tx.IdleSessions(o.now, sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, s := range sessions {
		if _, err := o.endSession(s, LostSessionExpired); err != nil {
			return 0, err
		}
	}
	return len(sessions), nil
}

func (m *Manager) sweepLost(o *op) (int, error) {
	lost, err := o.tx.LostBefore(o.now.Add(-m.cfg.LostRetention), sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, l := range lost {
		if err := o.tx.DeleteLost(l.Lock.Session, l.Lock.Key, l.Lock.Token); err != nil {
			return 0, err
		}
	}
	return len(lost), nil
}

func (m *Manager) sweepEndedSessions(o *op) (int, error) {
	ended, err := o.tx.EndedSessions(o.now.Add(-m.cfg.LostRetention), sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, s := range ended {
		if err := o.tx.DeleteSession(s.ID); err != nil {
			return 0, err
		}
	}
	return len(ended), nil
}

func (m *Manager) sweepAudit(o *op) (int, error) {
	return o.tx.PruneAudit(o.now.Add(-m.cfg.AuditRetention), sweepBatch)
}
