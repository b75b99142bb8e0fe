// Package histcheck records what clients do to a holdfast server and checks
// the history against a model of the lock semantics with porcupine: no two
// conflicting holders at once, tokens that only grow, and every
// acknowledged grant visible until it is released.
//
// A history is a list of operations, each with the time it was called, the
// time it returned, what was asked and what was answered. An operation whose
// answer was lost (the server died, the store was down) is recorded as
// unknown: it may or may not have taken effect, and the checker tries both.
// Expiry is modelled when the history records the store's clock (Tick, with
// a clock the test controls); otherwise histories use lifetimes far longer
// than the run and expiry plays no part.
package histcheck

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
)

// Kind names an operation.
type Kind string

const (
	Acquire      Kind = "acquire"
	Release      Kind = "release"
	Renew        Kind = "renew"
	Verify       Kind = "verify"
	Holders      Kind = "holders" // GET /v1/locks?key=K
	ForceRelease Kind = "force-release"
	EndSession   Kind = "end-session"
	Heartbeat    Kind = "heartbeat"
	// Tick records that the test moved the store's clock to Now.
	Tick Kind = "tick"
)

// Input is one request. Every key of an operation lies in one Family, and
// every session is used in one family only, so the history splits into
// families that are checked independently.
type Input struct {
	Kind     Kind
	Family   string
	Session  string
	User     string
	Keys     []string // Verify and Holders use Keys[0]
	Shared   bool
	Takeover bool
	Token    uint64 // Release (one key) and Verify; 0 means none
	// TTL is the lifetime asked for by Acquire and Renew; the recorder
	// fills in its default.
	TTL time.Duration
	// IdleTimeout is asked for by Acquire and Heartbeat; zero means none.
	IdleTimeout time.Duration
	Now         int64 // Tick: the store's new time, Unix milliseconds
}

// Outcome classifies an answer.
type Outcome string

const (
	OK      Outcome = "ok"
	Locked  Outcome = "locked"
	Lost    Outcome = "lock_lost"
	Stale   Outcome = "stale_token"
	Unknown Outcome = "unknown" // no answer: it may or may not have happened
	Failed  Outcome = "failed"  // an answer no correct server gives here
)

// Grant is a lock as the model sees it.
type Grant struct {
	Key     string
	Session string
	User    string
	Shared  bool
	Token   uint64 // 0 while unknown
	// Expires is Unix milliseconds, kept only while the clock is modelled.
	Expires int64
}

// Loss is a lock a heartbeat reports lost, and why.
type Loss struct {
	Key    string
	Token  uint64
	Reason string
}

// Output is one answer.
type Output struct {
	Outcome Outcome
	// Grants: acquired, released, renewed or verified locks, the listed
	// holders, or (Locked) every blocking holder, or (Stale) the current
	// grant.
	Grants  []Grant
	NotHeld []string // Release
	Held    int      // Heartbeat: the session's live locks
	Losses  []Loss   // Heartbeat, sorted by key then token
	Err     string   // Failed and Unknown
	// RetryAfter is the wait an unavailable answer (503) asked for; zero
	// for every other answer, and when there was none at all.
	RetryAfter time.Duration
}

// Op is one recorded operation. Times are nanoseconds since the recorder
// started; Return is math.MaxInt64 for an unknown outcome that no cut has
// bounded.
type Op struct {
	Client int
	Call   int64
	Return int64
	Input  Input
	Output Output
}

// Recorder runs operations against a holdfast.Service and records them. It
// is safe for concurrent use.
type Recorder struct {
	start time.Time
	ttl   holdfast.Duration

	mu  sync.Mutex
	ops []Op
	// open holds the indexes of unknown operations no cut has bounded.
	open []int
}

// NewRecorder returns an empty recorder. Every lock it acquires lives for
// ttl, which must be far longer than the history.
func NewRecorder(ttl time.Duration) *Recorder {
	return &Recorder{start: time.Now(), ttl: holdfast.Duration(ttl)}
}

func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Now is the recorder's clock, in which Op.Call and Op.Return are given,
// for marking moments of a test (an outage) in the history.
func (r *Recorder) Now() int64 { return r.now() }

// Cut bounds every unknown operation recorded so far: none of them can
// take effect after this moment. Call it once the server that was asked is
// dead and cannot come back with old requests (after kill -9, before the
// restart), or once a store outage is over and the store restarted.
func (r *Recorder) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for _, i := range r.open {
		r.ops[i].Return = now
	}
	r.open = r.open[:0]
}

// History returns a copy of the operations recorded so far.
func (r *Recorder) History() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Tick moves the store's clock with set (which must be atomic, and the
// store must read its clock inside its transactions) to now, and records
// it in every family: from then on, the checker judges expiry.
func (r *Recorder) Tick(client int, families []string, now time.Time, set func(time.Time)) {
	call := r.now()
	set(now)
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range families {
		r.ops = append(r.ops, Op{Client: client, Call: call, Return: ret, Input: Input{Kind: Tick, Family: f, Now: now.UnixMilli()}, Output: Output{Outcome: OK}})
	}
}

// Do runs in against svc as client and records it.
func (r *Recorder) Do(ctx context.Context, svc holdfast.Service, client int, in Input) Output {
	if in.TTL == 0 && (in.Kind == Acquire || in.Kind == Renew) {
		in.TTL = time.Duration(r.ttl)
	}
	call := r.now()
	out := r.run(ctx, svc, in)
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Outcome == Unknown {
		ret = math.MaxInt64
		r.open = append(r.open, len(r.ops))
	}
	r.ops = append(r.ops, Op{Client: client, Call: call, Return: ret, Input: in, Output: out})
	return out
}

func (r *Recorder) run(ctx context.Context, svc holdfast.Service, in Input) Output {
	switch in.Kind {
	case Acquire:
		mode := holdfast.Exclusive
		if in.Shared {
			mode = holdfast.Shared
		}
		res, err := svc.Acquire(ctx, holdfast.AcquireRequest{
			Keys: in.Keys, Mode: mode, Takeover: in.Takeover, TTL: holdfast.Duration(in.TTL), IdleTimeout: holdfast.Duration(in.IdleTimeout),
			Owner: holdfast.Owner{Session: in.Session, User: in.User},
		})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants(res.Locks)}
	case Release:
		res, err := svc.Release(ctx, holdfast.ReleaseRequest{Session: in.Session, Keys: in.Keys, Token: in.Token})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants(res.Released), NotHeld: sorted(res.NotHeld)}
	case Renew:
		res, err := svc.Renew(ctx, holdfast.RenewRequest{Session: in.Session, Keys: in.Keys, TTL: holdfast.Duration(in.TTL)})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants(res.Locks)}
	case Verify:
		res, err := svc.Verify(ctx, holdfast.VerifyRequest{Key: in.Keys[0], Session: in.Session, Token: in.Token})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants([]holdfast.Lock{res.Lock})}
	case Holders:
		res, err := svc.Locks(ctx, holdfast.LockQuery{Key: in.Keys[0], Limit: 1000})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants(res.Locks)}
	case ForceRelease:
		res, err := svc.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: in.Keys, Reason: "history check", Actor: "histcheck"})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants(res.Released)}
	case EndSession:
		res, err := svc.EndSession(ctx, holdfast.EndSessionRequest{Session: in.Session})
		if err != nil {
			return outcome(err)
		}
		return Output{Outcome: OK, Grants: grants(res.Released)}
	case Heartbeat:
		res, err := svc.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: in.Session, IdleTimeout: holdfast.Duration(in.IdleTimeout)})
		if err != nil {
			return outcome(err)
		}
		out := Output{Outcome: OK, Held: res.Session.Locks}
		for _, l := range res.Lost {
			out.Losses = append(out.Losses, Loss{Key: l.Lock.Key, Token: l.Lock.Token, Reason: string(l.Reason)})
		}
		slices.SortFunc(out.Losses, compareLosses)
		return out
	}
	return Output{Outcome: Failed, Err: "unknown operation " + string(in.Kind)}
}

// outcome classifies a refusal or failure. Only an unavailable store or a
// lost connection leaves the outcome unknown; any other error is an answer
// no correct server gives to the requests a workload makes.
func outcome(err error) Output {
	var (
		locked *holdfast.LockedError
		stale  *holdfast.StaleTokenError
	)
	switch {
	case errors.As(err, &locked):
		var blockers []holdfast.Lock
		for _, c := range locked.Conflicts {
			blockers = append(blockers, c.Holders...)
		}
		return Output{Outcome: Locked, Grants: grants(blockers)}
	case errors.As(err, &stale):
		return Output{Outcome: Stale, Grants: grants([]holdfast.Lock{stale.Lock})}
	case errors.Is(err, holdfast.ErrLockLost):
		return Output{Outcome: Lost}
	case errors.Is(err, holdfast.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		out := Output{Outcome: Unknown, Err: err.Error()}
		var unavailable *holdfast.UnavailableError
		if errors.As(err, &unavailable) {
			out.RetryAfter = unavailable.RetryAfter
		}
		return out
	default:
		return Output{Outcome: Failed, Err: err.Error()}
	}
}

// grants converts locks, de-duplicated and sorted by key then session.
func grants(locks []holdfast.Lock) []Grant {
	out := make([]Grant, 0, len(locks))
	for _, l := range locks {
		g := Grant{Key: l.Key, Session: l.Owner.Session, User: l.Owner.User, Shared: l.Mode == holdfast.Shared, Token: l.Token, Expires: l.ExpiresAt.UnixMilli()}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, compareGrants)
	return out
}

func compareGrants(a, b Grant) int {
	if a.Key != b.Key {
		if a.Key < b.Key {
			return -1
		}
		return 1
	}
	switch {
	case a.Session < b.Session:
		return -1
	case a.Session > b.Session:
		return 1
	}
	return 0
}

func compareLosses(a, b Loss) int {
	switch {
	case a.Key != b.Key:
		return strings.Compare(a.Key, b.Key)
	case a.Token < b.Token:
		return -1
	case a.Token > b.Token:
		return 1
	}
	return strings.Compare(a.Reason, b.Reason)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
