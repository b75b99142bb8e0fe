package holdfast

import (
	"context"
	"strconv"
	"time"

	"github.com/holdfast/holdfast/store"
)

// Heartbeat keeps a session alive (starting it if it is new) and reports,
// once, every lock it lost since its previous heartbeat and why. For a
// session that has ended it returns a *LockLostError with the reason and
// the locks the session lost.
func (m *Manager) Heartbeat(ctx context.Context, req HeartbeatRequest) (*HeartbeatResult, error) {
	if err := validateSession("session", req.Session); err != nil {
		return nil, err
	}
	if req.IdleTimeout < 0 {
		return nil, invalid("idle_timeout_seconds", "idle_timeout_seconds must be greater than 0")
	}
	h := &heartbeatOp{req: req}
	if err := m.apply(ctx, "heartbeat", scope{session: req.Session, reports: true}, h); err != nil {
		return nil, err
	}
	return &h.res, nil
}

// heartbeatOp is a heartbeat as an operation (see operation).
type heartbeatOp struct {
	req     HeartbeatRequest
	res     HeartbeatResult
	expires Time // res.Session.ExpiresAt
}

func (h *heartbeatOp) run(o *op) error {
	req := &h.req
	s, live, err := o.liveSession(req.Session)
	if err != nil {
		return err
	}
	if s.Ended() { // ended before, or just now for being idle
		return o.endedError(s)
	}
	activity := live && (req.IdleTimeout == 0 || time.Duration(req.IdleTimeout) == s.IdleTimeout)
	if !live {
		s = store.Session{ID: req.Session}
	}
	s.LastSeen = o.now
	if req.IdleTimeout > 0 {
		s.IdleTimeout = time.Duration(req.IdleTimeout)
	}
	put := o.putSession
	if activity {
		// Nothing but LastSeen changes: the bulk of all traffic, and
		// worth no fsync of its own.
		put = o.touchSession
	}
	if err := put(s); err != nil {
		return err
	}
	locks, err := o.tx.SessionLocks(s.ID)
	if err != nil {
		return err
	}
	held := 0
	for _, l := range locks {
		if ok, err := o.stillHeld(l); err != nil {
			return err
		} else if ok {
			held++
		}
	}
	lost, err := o.reportLost(s.ID)
	if err != nil {
		return err
	}
	h.res = HeartbeatResult{Session: o.sessionInfo(s, held, &h.expires), Lost: lost}
	return nil
}

// reportLost returns the session's losses not yet reported and marks them
// reported, so each is listed once.
func (o *op) reportLost(session string) ([]LostLock, error) {
	all, err := o.tx.Lost(session)
	if err != nil {
		return nil, err
	}
	out := []LostLock{}
	for _, l := range all {
		if l.Reported {
			continue
		}
		l.Reported = true
		if err := o.tx.PutLost(l); err != nil {
			return nil, err
		}
		out = append(out, LostLock{Lock: toLock(l.Lock), Reason: LostReason(l.Reason), Actor: l.Actor, ForceReason: l.ForceReason})
	}
	return out, nil
}

// endedError tells a late caller that its session ended, why, and which
// locks it lost with it.
func (o *readOp) endedError(s store.Session) error {
	reason := LostReason(s.EndReason)
	lost, err := o.rtx.Lost(s.ID)
	if err != nil {
		return err
	}
	released := []Lock{}
	for _, l := range lost {
		if l.Reason == s.EndReason && l.At.Equal(s.EndedAt) {
			released = append(released, toLock(l.Lock))
		}
	}
	msg := "session " + s.ID + " has ended"
	if reason == LostSessionExpired {
		msg += ": no heartbeat or request came within its idle timeout"
	}
	msg += "; it lost " + plural(len(released), "lock") + " at " + clock(s.EndedAt, o.now) + ". Acquire again to start it anew."
	return &LockLostError{Reason: reason, Released: released, Message: msg}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// sessionInfo describes s. Its idle deadline, if it has one, is kept in
// expires, for info.ExpiresAt to point to: the caller provides it with
// the result it belongs to, so that it costs no allocation of its own.
func (o *readOp) sessionInfo(s store.Session, locks int, expires *Time) SessionInfo {
	info := SessionInfo{ID: s.ID, User: s.User, Name: s.Name, LastSeen: Time(s.LastSeen),
		IdleTimeout: Duration(s.IdleTimeout), Locks: locks}
	if d := o.idleDeadline(s); !d.IsZero() {
		*expires = Time(d)
		info.ExpiresAt = expires
	}
	return info
}

// EndSession ends the session and releases all its locks (logout, session
// invalidation). Ending an unknown or ended session is not an error.
func (m *Manager) EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error) {
	if err := validateSession("session", req.Session); err != nil {
		return nil, err
	}
	res := &EndSessionResult{Released: []Lock{}}
	err := m.update(ctx, "end_session", scope{session: req.Session}, func(o *op) error {
		res.Released = []Lock{}
		s, live, err := o.touch(req.Session)
		if err != nil || !live {
			return err
		}
		released, err := o.endSession(s, LostSessionEnded)
		if err != nil {
			return err
		}
		res.Released = toLocks(released)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// heldLocks counts the unexpired locks of each of sessions; a session
// holding none has no entry.
func (o *readOp) heldLocks(sessions []store.Session) (map[string]int, error) {
	if len(sessions) == 0 {
		return nil, nil
	}
	if c, ok := o.rtx.(store.LockCounter); ok {
		ids := make([]string, len(sessions))
		for i, s := range sessions {
			ids[i] = s.ID
		}
		return c.CountLocks(ids, o.now)
	}
	held := make(map[string]int, len(sessions))
	for _, s := range sessions {
		locks, err := o.rtx.SessionLocks(s.ID)
		if err != nil {
			return nil, err
		}
		for _, l := range locks {
			if l.ExpiresAt.After(o.now) {
				held[s.ID]++
			}
		}
	}
	return held, nil
}

// Sessions lists live sessions, sorted by id.
func (m *Manager) Sessions(ctx context.Context, q SessionQuery) (*SessionPage, error) {
	limit, err := pageSize(q.Limit)
	if err != nil {
		return nil, err
	}
	var page *SessionPage
	err = m.view(ctx, "sessions", func(o *readOp) error {
		page = &SessionPage{Sessions: []SessionInfo{}}
		var live []store.Session
		keep := func(s store.Session) {
			if !s.Ended() && !o.idle(s) {
				live = append(live, s)
			}
		}
		if q.Session != "" {
			s, ok, err := o.session(q.Session)
			if err != nil {
				return err
			}
			if ok && (q.User == "" || s.User == q.User) && s.ID > q.After {
				keep(s)
			}
		} else {
			sq := store.SessionQuery{User: q.User, After: q.After}
			for len(live) <= limit {
				sq.Limit = limit + 1 - len(live)
				batch, err := o.rtx.Sessions(sq)
				if err != nil {
					return err
				}
				for _, s := range batch {
					keep(s)
				}
				if len(batch) < sq.Limit {
					break
				}
				sq.After = batch[len(batch)-1].ID
			}
		}
		if len(live) > limit {
			live = live[:limit]
			next := live[limit-1].ID
			page.Next = &next
		}
		held, err := o.heldLocks(live)
		if err != nil {
			return err
		}
		expires := make([]Time, len(live))
		for i, s := range live {
			page.Sessions = append(page.Sessions, o.sessionInfo(s, held[s.ID], &expires[i]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}
