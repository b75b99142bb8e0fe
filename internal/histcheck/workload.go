package histcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
)

// Workload is a random mix of lock operations by concurrent clients on a
// few small key families, built to make conflicts frequent: each family is
// a root key with children and a grandchild, and three sessions, two of
// them the same user (so takeovers happen) and one anonymous.
type Workload struct {
	// Prefix starts every key and session, so several workloads can share
	// a server; default "h".
	Prefix   string
	Families int // default 4
	Clients  int // default 8
	// FirstClient numbers the clients from it, so that workloads run
	// side by side on one recorder (one per server node) are told apart.
	FirstClient int
	// Ops is how many operations each client makes; zero means until the
	// context ends.
	Ops  int
	Seed uint64
	// TTL, when set, is the shortest lifetime acquires and renewals ask
	// for (they ask for one to three times it), and acquires and
	// heartbeats sometimes ask for an idle timeout as long; zero leaves
	// lifetimes to the recorder and asks for no idle timeouts. Histories
	// that tick the clock use it to make locks and sessions expire.
	TTL time.Duration
	// OnUnknown is called when a client's operation has an unknown
	// outcome (the server or its store is gone); the client goes on if
	// it returns true. Nil stops the client: its following requests would
	// only fail too, and every unknown outcome doubles what the checker
	// must consider.
	OnUnknown func(ctx context.Context) bool
}

func (w Workload) withDefaults() Workload {
	if w.Prefix == "" {
		w.Prefix = "h"
	}
	if w.Families == 0 {
		w.Families = 4
	}
	if w.Clients == 0 {
		w.Clients = 8
	}
	return w
}

// Keys returns every key of a family.
func (w Workload) Keys(family int) []string {
	w = w.withDefaults()
	root := fmt.Sprintf("%s/%d", w.Prefix, family)
	return []string{root, root + "/a", root + "/a/x", root + "/b"}
}

// idle is an idle timeout for a third of the requests that may carry one,
// when lifetimes are short enough for the history to see it pass.
func (w Workload) idle(rng *rand.Rand) time.Duration {
	if w.TTL == 0 || rng.IntN(3) > 0 {
		return 0
	}
	return w.TTL * time.Duration(1+rng.IntN(3))
}

// FamilyNames lists every family's name, for Recorder.Tick.
func (w Workload) FamilyNames() []string {
	w = w.withDefaults()
	names := make([]string, w.Families)
	for f := range names {
		names[f] = w.Family(f)
	}
	return names
}

// Family names a family in Input.Family.
func (w Workload) Family(family int) string {
	return fmt.Sprintf("%s/%d", w.withDefaults().Prefix, family)
}

// Run lets the clients work against svc until ctx ends, each has made Ops
// operations, or OnUnknown stops them. The end of ctx stops clients
// between operations; an operation under way runs to its answer, so that
// stopping the load leaves no unknown outcome behind on a server that
// lives on.
func (w Workload) Run(ctx context.Context, svc holdfast.Service, rec *Recorder) {
	w = w.withDefaults()
	var tokens sync.Map // key@session → last token seen
	var wg sync.WaitGroup
	for c := range w.Clients {
		rng := rand.New(rand.NewPCG(w.Seed, uint64(c)))
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && (w.Ops == 0 || i < w.Ops); i++ {
				in := w.next(rng, &tokens)
				out := rec.Do(context.WithoutCancel(ctx), svc, w.FirstClient+c, in)
				if out.Outcome == Unknown && (w.OnUnknown == nil || !w.OnUnknown(ctx)) {
					return
				}
				for _, g := range out.Grants {
					tokens.Store(g.Key+"@"+g.Session, g.Token)
				}
			}
		})
	}
	wg.Wait()
}

// ReadAll records a holders read of every key of every family: after a
// restart, this pins down what survived.
func (w Workload) ReadAll(ctx context.Context, svc holdfast.Service, rec *Recorder, client int) error {
	w = w.withDefaults()
	for f := range w.Families {
		for _, k := range w.Keys(f) {
			out := rec.Do(ctx, svc, client, Input{Kind: Holders, Family: w.Family(f), Keys: []string{k}})
			if out.Outcome != OK {
				return fmt.Errorf("reading holders of %s: %s %s", k, out.Outcome, out.Err)
			}
		}
	}
	return nil
}

var sessionUsers = []string{"ann", "ann", ""}

func (w Workload) next(rng *rand.Rand, tokens *sync.Map) Input {
	f := rng.IntN(w.Families)
	keys := w.Keys(f)
	s := rng.IntN(len(sessionUsers))
	in := Input{
		Family:  w.Family(f),
		Session: fmt.Sprintf("%s-s%d", w.Family(f), s),
		User:    sessionUsers[s],
		Keys:    []string{keys[rng.IntN(len(keys))]},
	}
	if rng.IntN(3) == 0 {
		in.Keys = append(in.Keys, keys[rng.IntN(len(keys))])
		in.Keys = slices.Compact(sorted(in.Keys))
	}
	knownToken := func() uint64 {
		if v, ok := tokens.Load(in.Keys[0] + "@" + in.Session); ok && rng.IntN(4) > 0 {
			return v.(uint64)
		}
		return uint64(rng.IntN(3)) // 0 (none) or a token long gone
	}
	switch r := rng.IntN(100); {
	case r < 40:
		in.Kind = Acquire
		in.Shared = rng.IntN(3) == 0
		in.Takeover = rng.IntN(6) == 0
		in.TTL = w.TTL * time.Duration(1+rng.IntN(3))
		in.IdleTimeout = w.idle(rng)
	case r < 60:
		in.Kind = Release
		if len(in.Keys) == 1 && rng.IntN(3) == 0 {
			in.Token = knownToken()
		}
	case r < 65:
		in.Kind = Renew
		in.TTL = w.TTL * time.Duration(1+rng.IntN(3))
	case r < 75:
		in.Kind = Verify
		in.Keys = in.Keys[:1]
		in.Token = knownToken()
	case r < 86:
		in.Kind = Holders
		in.Session, in.User, in.Keys = "", "", in.Keys[:1]
	case r < 92:
		in.Kind = Heartbeat
		in.Keys = nil
		in.IdleTimeout = w.idle(rng)
	case r < 96:
		in.Kind = ForceRelease
		in.Session, in.User = "", ""
	default:
		in.Kind = EndSession
		in.Keys = nil
	}
	return in
}
