package adminui

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/holdfast/holdfast"
)

// maxReasonBytes bounds a release reason; it goes to the holder and the
// audit log.
const maxReasonBytes = 1000

// releaseTarget is what one force release is about: the holders of a key
// (or one of them), a session's locks, or every session of a user.
type releaseTarget struct {
	Key     string
	Session string
	User    string
	Return  string
}

func targetOf(r *http.Request) (releaseTarget, error) {
	get := func(k string) string {
		if r.Method == http.MethodPost {
			return strings.TrimSpace(r.PostFormValue(k))
		}
		return strings.TrimSpace(r.URL.Query().Get(k))
	}
	t := releaseTarget{Key: get("key"), Session: get("session"), User: get("user")}
	t.Return = localPath(get("return"), "/")
	switch {
	case t.Key != "":
		if err := holdfast.ValidateKey(t.Key); err != nil {
			return t, fmt.Errorf("not a lock key: %w", err)
		}
		t.User = ""
	case t.Session != "":
		t.User = ""
	case t.User == "":
		return t, fmt.Errorf("say what to release: a key, a session or a user")
	}
	return t, nil
}

// Describe says in words what is released.
func (t releaseTarget) Describe() string {
	switch {
	case t.Key != "" && t.Session != "":
		return "the lock on " + t.Key + " held by session " + shortID(t.Session)
	case t.Key != "":
		return "every lock on " + t.Key
	case t.Session != "":
		return "every lock of session " + shortID(t.Session)
	default:
		return "every lock of user " + t.User
	}
}

type releaseView struct {
	Target   releaseTarget
	Holders  []lockRow
	More     bool // more locks than listed
	Reason   string
	Error    string
	Sessions int // for a user: the live sessions whose locks go
}

// Heading names the holder when there is exactly one.
func (v releaseView) Heading() string {
	if v.Target.Key != "" && len(v.Holders) == 1 {
		return "the lock on " + v.Target.Key + " held by " + v.Holders[0].Holder
	}
	return v.Target.Describe()
}

func (v releaseView) title() string { return "Force release " + v.Heading() }

// confirmRelease names the holders and asks for the reason.
func (c *Console) confirmRelease(w http.ResponseWriter, r *http.Request) {
	if sessionOf(r.Context()).access != FullAccess {
		c.fail(w, r, http.StatusForbidden, "Your sign-in is read-only: force release needs an admin token.")
		return
	}
	t, err := targetOf(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	v, err := c.releaseData(r.Context(), t)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "release", nil, v)
}

func (c *Console) releaseData(ctx context.Context, t releaseTarget) (releaseView, error) {
	v := releaseView{Target: t}
	q := holdfast.LockQuery{Limit: maxPageSize}
	switch {
	case t.Key != "":
		q.Key = t.Key
	case t.Session != "":
		q.Session = t.Session
	default:
		q.User = t.User
	}
	page, err := c.mgr.Locks(ctx, q)
	if err != nil {
		return v, err
	}
	v.More = page.Next != nil
	now := c.cfg.Now()
	for _, l := range page.Locks {
		if t.Key != "" && (l.Key != t.Key || (t.Session != "" && l.Owner.Session != t.Session)) {
			continue
		}
		v.Holders = append(v.Holders, c.rowOf(l, now))
	}
	return v, nil
}

// release force-releases, with the signed-in identity as the actor.
func (c *Console) release(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	if s.access != FullAccess {
		c.fail(w, r, http.StatusForbidden, "Your sign-in is read-only: force release needs an admin token.")
		return
	}
	t, err := targetOf(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" || len(reason) > maxReasonBytes {
		v, err := c.releaseData(r.Context(), t)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		v.Reason = reason
		v.Error = "A reason is required: it is shown to the holder and kept in the audit log."
		if reason != "" {
			v.Error = fmt.Sprintf("The reason is too long: at most %d bytes.", maxReasonBytes)
		}
		c.render(w, r, http.StatusUnprocessableEntity, "release", nil, v)
		return
	}
	released, err := c.forceRelease(r.Context(), t, reason, s.actor)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.log.InfoContext(r.Context(), "console force release",
		"actor", s.actor, "key", t.Key, "session", t.Session, "user", t.User, "released", len(released))
	s.setFlash("ok", releasedText(released))
	http.Redirect(w, r, t.Return, http.StatusSeeOther)
}

func (c *Console) forceRelease(ctx context.Context, t releaseTarget, reason, actor string) ([]holdfast.Lock, error) {
	req := holdfast.ForceReleaseRequest{Session: t.Session, Reason: reason, Actor: actor}
	if t.Key != "" {
		req.Keys = []string{t.Key}
	}
	if t.User == "" {
		res, err := c.mgr.ForceRelease(ctx, req)
		if err != nil {
			return nil, err
		}
		return res.Released, nil
	}
	// A user's locks are the locks of each of the user's sessions.
	var released []holdfast.Lock
	q := holdfast.SessionQuery{User: t.User, Limit: maxPageSize}
	for {
		page, err := c.mgr.Sessions(ctx, q)
		if err != nil {
			return released, err
		}
		for _, sess := range page.Sessions {
			req.Session = sess.ID
			res, err := c.mgr.ForceRelease(ctx, req)
			if err != nil {
				return released, err
			}
			released = append(released, res.Released...)
		}
		if page.Next == nil {
			return released, nil
		}
		q.After = *page.Next
	}
}

// releasedText is the message after a release.
func releasedText(locks []holdfast.Lock) string {
	switch len(locks) {
	case 0:
		return "Nothing was released: the lock was no longer held."
	case 1:
		return fmt.Sprintf("Released %s, held by %s. The reason is in the audit log and will be shown to the holder.", locks[0].Key, holderName(locks[0].Owner))
	default:
		return fmt.Sprintf("Released %d locks. The reason is in the audit log and will be shown to their holders.", len(locks))
	}
}
