package holdfast

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/store"
)

// maxGroup bounds how many operations share one transaction, so that one
// commit stays short; a batch counts its operations, and a group holds
// at least one caller's, however many.
const maxGroup = 128

// scope names what an operation will touch: the keys as its caller gave
// them, the session it acts for and whether it reads that session's lost
// records. It is only a hint, for store.Preparer.
type scope struct {
	keys    []string
	session string
	reports bool
	batch   *batchRun // a Batch: its operations' scopes
}

// touched gathers the scopes of the operations of one transaction.
type touched struct {
	keys, sessions, reporting []string
}

func (t *touched) add(s scope) {
	if r := s.batch; r != nil {
		if !r.gathered {
			r.gather()
		}
		t.keys = append(t.keys, r.touched.keys...)
		t.sessions = append(t.sessions, r.touched.sessions...)
		t.reporting = append(t.reporting, r.touched.reporting...)
		return
	}
	t.keys = append(t.keys, s.keys...)
	if s.session != "" {
		t.sessions = append(t.sessions, s.session)
		if s.reports {
			t.reporting = append(t.reporting, s.session)
		}
	}
}

// pending is one read-write operation on its way into a shared
// transaction, and then its answer.
type pending struct {
	ctx   context.Context
	name  string
	scope scope
	do    operation
	start time.Time
	// queued is when it joined the queue, when the grouper bounds the
	// wait (grouper.maxWait).
	queued time.Time

	op  op    // its state in the transaction; op.audit is what it wrote
	err error // nil, a refusal or a failure
	// panicked is what its operation panicked with, to be raised again
	// on its caller's goroutine rather than on its group leader's.
	panicked *recovered

	// group is the group it was taken into from the queue (set under
	// grouper.mu); woken receives nil once it is answered, or the group
	// its goroutine must lead.
	group *group
	woken chan *group
	self  [1]*pending // a group of one, without an allocation

	leader leader // when its goroutine leads a group
}

// pendings are reused: most of an operation's bookkeeping (its op, its
// audit and session buffers, its wake-up channel) then costs nothing.
var pendings = sync.Pool{New: func() any {
	p := &pending{woken: make(chan *group, 1)}
	p.self[0] = p
	p.leader.body = p.leader.transact
	return p
}}

func newPending(ctx context.Context, name string, sc scope, do operation, start time.Time) *pending {
	p := pendings.Get().(*pending)
	p.ctx, p.name, p.scope, p.do, p.start = ctx, name, sc, do, start
	return p
}

// recycle returns p to the pool once its caller has its answer.
func (p *pending) recycle() {
	p.ctx, p.name, p.scope, p.do, p.err, p.group, p.panicked = nil, "", scope{}, nil, nil, nil, nil
	p.queued = time.Time{}
	p.op.forget()
	p.leader = leader{body: p.leader.body}
	pendings.Put(p)
}

// run runs p as one operation in tx and reports whether it failed other
// than by refusing, in which case the transaction must not commit. A
// refusal is an answer, not a failure: what the operation wrote before
// refusing (the session's activity, the removal of records found expired)
// is true either way and is kept.
func (p *pending) run(m *Manager, tx store.Tx) (failed bool) {
	p.op.begin(m, tx)
	p.err = p.runOp()
	return p.err != nil && !isRefusal(p.err)
}

// errPanicked fails the transaction of an operation, or a batch's fn,
// that panicked.
var errPanicked = errors.New("holdfast: an operation panicked")

// runOp runs p's operation, keeping a panic for its caller: this may be
// the goroutine of another caller, who leads the group. Once it panicked,
// a store that runs the transaction again does not run it again.
func (p *pending) runOp() (err error) {
	if p.panicked != nil {
		return errPanicked
	}
	defer func() {
		if v := recover(); v != nil {
			p.panicked = &recovered{value: v, stack: debug.Stack()}
			err = errPanicked
		}
	}()
	return p.do.run(&p.op)
}

// group is what the queue held when its turn came: operations that were
// all pending at once, so that any order of them is a valid one.
type group struct {
	ops    []*pending
	leader *pending
	// ctx is done once every caller has given up: one caller's
	// cancellation must not fail the others' operations.
	ctx     context.Context
	cancel  context.CancelFunc
	waiting atomic.Int64
}

func (g *group) gone() {
	if g.waiting.Add(-1) == 0 {
		g.cancel()
	}
}

// grouper runs the operations of one group at a time, and lets at most
// limit groups' transactions be under way. Operations that arrive
// meanwhile queue, and the queue becomes the next group as soon as there
// is room: a group's transaction can start while the previous one is
// still being made durable.
type grouper struct {
	mu       sync.Mutex
	running  bool // a group's operations are running
	inFlight int  // groups whose transactions have not returned
	limit    int  // on inFlight: maxInFlight, or none over a store.Merger
	queue    []*pending
	// maxWait bounds how long an operation waits in the queue, where the
	// store bounds its transactions (store.Bounded): one that waited
	// longer, behind groups whose transactions hung until the store gave
	// up on them or only just kept within its bound, fails unavailable
	// without a transaction of its own (expireLocked). Zero: no bound.
	maxWait time.Duration
}

// maxInFlight is two over a store that commits each transaction on its
// own (PostgreSQL): the store can work on one group while it waits for
// the database to commit the other, and more would only split the queue
// into smaller groups, each paying for its own commit (docs/POSTGRES.md).
// A store.Merger has no bound: its transactions share durable writes, so
// each group runs its operations as soon as the one before has run its
// own, while those before wait for the disk together (docs/STORAGE.md).
const maxInFlight = 2

// merges reports whether s merges concurrent commits (store.Merger).
func merges(s store.Store) bool {
	m, ok := s.(store.Merger)
	return ok && m.MergesCommits()
}

// join waits for p's turn. It returns lead true when p's goroutine must
// lead g (nil: p alone); else p is answered, or gave up while queued.
func (gr *grouper) join(p *pending) (g *group, lead bool) {
	gr.mu.Lock()
	if !gr.running && gr.inFlight < gr.limit {
		// Alone: no waiting.
		gr.running = true
		gr.inFlight++
		gr.mu.Unlock()
		return nil, true
	}
	if gr.maxWait > 0 {
		p.queued = time.Now()
	}
	gr.queue = append(gr.queue, p)
	gr.mu.Unlock()
	select {
	case g := <-p.woken:
		return g, g != nil
	case <-p.ctx.Done():
	}
	gr.mu.Lock()
	if i := slices.Index(gr.queue, p); i >= 0 {
		gr.queue = slices.Delete(gr.queue, i, i+1)
		gr.mu.Unlock()
		p.err = classify(p.ctx.Err()) // it never ran
		return nil, false
	}
	g = p.group
	gr.mu.Unlock()
	if g != nil && g.leader != p {
		g.gone()
	}
	g = <-p.woken // in a group already, or answered: its answer is coming
	return g, g != nil
}

// ran tells gr that a group's operations have run.
func (gr *grouper) ran() {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	gr.running = false
	gr.startLocked()
}

// done tells gr that a group's transaction has returned.
func (gr *grouper) done() {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	gr.inFlight--
	gr.startLocked()
}

// startLocked starts the next group, led by the first queued, if there is
// room for it.
func (gr *grouper) startLocked() {
	if gr.running || gr.inFlight >= gr.limit || len(gr.queue) == 0 {
		return
	}
	if gr.maxWait > 0 {
		gr.expireLocked()
		if len(gr.queue) == 0 {
			return
		}
	}
	n, weight := 1, gr.queue[0].weight()
	for ; n < len(gr.queue); n++ {
		if weight += gr.queue[n].weight(); weight > maxGroup {
			break
		}
	}
	gr.running = true
	gr.inFlight++
	g := &group{ops: slices.Clone(gr.queue[:n]), leader: gr.queue[0]}
	gr.shiftLocked(n)
	if n > 1 {
		g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(g.leader.ctx))
		g.waiting.Store(int64(n))
	}
	for _, p := range g.ops {
		p.group = g
	}
	g.leader.woken <- g
}

// expireLocked answers the queued operations that have waited longer
// than maxWait with ErrUnavailable: the store gives up on a transaction
// after that long, and the groups ahead of them took as long, hung or
// too slow for the load, so theirs would most likely fare no better;
// on a store that is merely behind, this sheds load.
func (gr *grouper) expireLocked() {
	// The queue is in the order its operations joined it, under gr.mu, on
	// the monotonic clock: those that waited too long are at its head.
	now, n := time.Now(), 0
	for ; n < len(gr.queue); n++ {
		p := gr.queue[n]
		waited := now.Sub(p.queued)
		if waited <= gr.maxWait {
			break
		}
		p.err = &UnavailableError{RetryAfter: time.Second, Err: fmt.Errorf(
			"holdfast: waited %s for a turn, longer than the store gives a transaction (%s): the store is not keeping up, hung or overloaded",
			waited.Round(time.Millisecond), gr.maxWait)}
		p.woken <- nil
	}
	gr.shiftLocked(n)
}

// shiftLocked takes the first n operations off the queue, keeping its
// array, and clears the slots it leaves so they pin nothing.
func (gr *grouper) shiftLocked(n int) {
	left := copy(gr.queue, gr.queue[n:])
	clear(gr.queue[left:])
	gr.queue = gr.queue[:left]
}

// lead commits self's group (self alone when g is nil), in one
// transaction if it can, and answers every operation of it. An operation
// that fails other than by refusing is taken out, the others run again
// without it, and then it runs alone: its failure undoes only its own
// writes, and no caller gets another's error; but a store that could not
// answer fails them all (storeDown), those taken out before included. An
// operation that panics is such a failure, and panics again on its own
// caller's goroutine (apply), the store's later failure or not; a panic
// of the store itself is raised again on self's.
func (m *Manager) lead(self *pending, g *group) {
	ops, ctx := self.self[:], self.ctx
	if g != nil && len(g.ops) > 1 {
		ops, ctx = g.ops, g.ctx
		stop := context.AfterFunc(self.ctx, g.gone)
		defer func() {
			stop()
			g.cancel()
		}()
	}
	l := &self.leader
	l.m, l.self, l.ran, l.submitted = m, self, false, false
	defer m.groups.done()
	// unanswered are the operations not answered yet (an answered one
	// may be another caller's already): if the store panics, or ends the
	// goroutine, they are told that the store failed them, and the panic
	// goes on here.
	var alone, unanswered []*pending
	finished := false
	defer func() {
		if finished {
			return
		}
		v := recover()
		l.opsRan()
		l.unsure()
		for _, p := range unanswered {
			if p != self {
				p.err = &UnavailableError{RetryAfter: time.Second, Err: errStorePanicked}
				p.woken <- nil
			}
		}
		if v != nil {
			panic(v)
		}
	}()
	for len(ops) > 0 {
		unanswered = ops
		if len(alone) > 0 {
			unanswered = slices.Concat(ops, alone)
		}
		failed := l.commit(ctx, ops)
		if failed == nil {
			break
		}
		ops = slices.DeleteFunc(ops, func(p *pending) bool { return p == failed })
		alone = append(alone, failed)
	}
	unanswered = alone
	l.opsRan() // in case the store never got as far as running them
	for i, p := range alone {
		unanswered = alone[i:]
		if l.down != nil && p.panicked == nil {
			// The store was found unable to answer after p was taken
			// out: alone, p would wait as long to meet the same.
			p.err = l.down
			if p != self {
				p.woken <- nil
			}
			continue
		}
		if p.scope.batch != nil || p.panicked != nil {
			// A batch runs its operations one by one itself (see Batch);
			// an operation that panicked panics again on its caller's
			// goroutine (see apply), with the error of the failed
			// transaction.
			if p != self {
				p.woken <- nil
			}
			continue
		}
		l.commit(p.ctx, p.self[:])
	}
	finished = true
}

// errStorePanicked is what the callers of a group learn when the store
// panicked in its transaction: the panic itself goes on in the leader.
var errStorePanicked = errors.New("holdfast: the store panicked in this operation's transaction")

// commitAlone commits p in a transaction of its own, outside the groups.
func (m *Manager) commitAlone(p *pending) {
	l := &p.leader
	l.m, l.self, l.ran = m, p, true // ran: there is no grouper to tell
	l.commit(p.ctx, p.self[:])
}

// leader is the state of the transactions a group's leader runs. It lives
// in the leader's pending, so that leading costs no allocation.
type leader struct {
	m      *Manager
	self   *pending
	ops    []*pending // in the transaction
	failed *pending   // the one that failed other than by refusing
	ran    bool       // the grouper was told the operations ran
	down   error      // the failure of a transaction the store could not answer
	// submitted says the last run of the body returned nil: the store
	// was asked to commit what the operations wrote.
	submitted bool
	body      func(store.Tx) error
	// ticket is the transaction's place in the order of publication,
	// taken by its last run (held says it is not yet handed back).
	ticket uint64
	held   bool
}

// opsRan tells the grouper, once, that the operations have run.
func (l *leader) opsRan() {
	if !l.ran {
		l.ran = true
		l.m.groups.ran()
	}
}

// commit runs ops in one transaction and answers them, except when one of
// several fails other than by refusing, and not because the store is
// down: then nothing is kept or answered, and commit returns that one.
func (l *leader) commit(ctx context.Context, ops []*pending) (failed *pending) {
	l.ops, l.failed, l.submitted = ops, nil, false
	defer l.giveBack(nil) // a ticket still held publishes nothing
	var start time.Time
	if l.m.commits != nil {
		start = time.Now()
	}
	err := l.m.store.Update(ctx, l.body)
	if l.failed != nil && len(ops) > 1 && errors.Is(err, l.failed.err) &&
		(!storeDown(err) || l.failed.scope.batch != nil) {
		// A batch is taken out all the same: its own code's time counts
		// against a store's bound, so its failure may be its own.
		return l.failed
	}
	if l.m.settle(ops, err) {
		l.giveBack(ops)
		if l.m.commits != nil {
			n := 0
			for _, p := range ops {
				n += p.operations()
			}
			// Before the callers are woken and reuse ops: were the
			// observer to panic after, lead would wake them again.
			if n > 0 {
				l.m.commits.ObserveCommit(n, time.Since(start))
			}
		}
	} else {
		if storeDown(err) {
			l.down = ops[0].err // err as settle gave it to them
		}
		l.unsure()
	}
	for _, p := range ops {
		if p != l.self {
			p.woken <- nil
		}
	}
	return nil
}

// unsure is called when the store failed, or panicked in, the last
// transaction. If its body ran to the end, the store may have committed
// what the operations wrote and failed only to say so (a commit whose
// answer was lost, a disk that stalled before making it durable): their
// audit entries will not be published, so every subscriber is dropped, to
// resume from the audit log, which has them if it did.
func (l *leader) unsure() {
	if !l.submitted {
		return
	}
	for entries := range audits(l.ops) {
		if len(entries) > 0 {
			l.m.events.dropAll()
			return
		}
	}
}

// transact is the body of the transaction, bound to l.body once.
func (l *leader) transact(tx store.Tx) error {
	defer l.opsRan()
	l.failed, l.submitted = nil, false // the store may call it again: the last call counts
	l.giveBack(nil)
	if l.m.order.ordered {
		l.ticket, l.held = l.m.order.take(), true
	}
	pr, ok := tx.(store.Preparer)
	if ok && !l.m.prepares.Load() {
		l.m.prepares.Store(true) // batches learn their scope before they queue
	}
	// Several operations, or one on several keys, read ahead: over
	// PostgreSQL an acquire of eight keys alone took 25 round trips
	// without, 2 with (pgstore's TestRoundTrips). Reading ahead reads
	// every lock of the operations' sessions too, which one on a single
	// key does not need, and its 4 round trips gained nothing measurable
	// as 2 under the cycle workload (docs/POSTGRES.md).
	if ok && (len(l.ops) > 1 || l.ops[0].scope.batch != nil || len(l.ops[0].scope.keys) > 1) {
		var t touched
		for _, p := range l.ops {
			t.add(p.scope)
		}
		if err := pr.Prepare(t.keys, t.sessions, t.reporting); err != nil {
			return err
		}
	}
	for _, p := range l.ops {
		if p.run(l.m, tx) {
			l.failed = p
			return p.err
		}
	}
	l.submitted = true
	return nil
}

// storeDown reports whether a transaction failed because the store could
// not answer (store.ErrUnavailable: unreachable, or out of its time):
// running its operations again, without the one that met the failure or
// one by one, would only meet it again, each after as long.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable)
}

// giveBack publishes what ops wrote (nil: nothing was kept), through
// the transaction's ticket if it holds one.
func (l *leader) giveBack(ops []*pending) {
	if !l.held {
		publishAudits(&l.m.events, ops)
		return
	}
	l.held = false
	l.m.order.publish(l.ticket, ops, &l.m.events)
}

// settle gives ops the outcome of their transaction, the store's error if
// it failed, else each its own answer, and reports whether it committed,
// so that what they wrote is to be published.
func (m *Manager) settle(ops []*pending, err error) (committed bool) {
	if err = classify(err); err != nil {
		for _, p := range ops {
			p.err = err
		}
		return false
	}
	return true
}

// publishOrder publishes the audit entries of transactions over a
// store.Merger (logstore, pebblestore, memstore) in the order they
// committed. One durable write of such a store wakes the leaders of many
// transactions, which would publish in whatever order they run, and a
// subscriber must see audit IDs rise: an event stream skips an entry
// older than the last it sent. Each run of a transaction takes a ticket
// inside it, where those stores hold their one write lock, so tickets
// follow commits; entries whose ticket comes after one not yet handed
// back wait for it. Such a store answers its commits in order, so they
// wait only for transactions answered at about the same time. Over other
// stores (PostgreSQL) a transaction's commit may take far longer than the
// next one's, which must not hold its events back: each publishes as soon
// as it has committed.
type publishOrder struct {
	ordered bool          // the store is a store.Merger
	taken   atomic.Uint64 // tickets handed out

	mu      sync.Mutex
	next    uint64                  // the first ticket not handed back
	waiting map[uint64][]AuditEntry // entries handed back early, by ticket
	spare   [][]AuditEntry          // emptied buffers of waiting, for reuse
}

// publishOrder keeps at most spareBuffers buffers for reuse, none holding
// more than spareEntries: one huge batch's must not stay pinned.
const spareBuffers, spareEntries = 16, 128

// take hands out the next ticket. It takes no lock of publishOrder's, so
// that the store's write lock does not wait for a publication (but for a
// store that runs a transaction's body again, which hands the first run's
// ticket back from inside the body).
func (o *publishOrder) take() uint64 { return o.taken.Add(1) - 1 }

// publish hands ticket t back with the operations whose entries it
// publishes, now if no earlier ticket is out, else once they are back.
func (o *publishOrder) publish(t uint64, ops []*pending, e *events) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t != o.next {
		var held []AuditEntry
		if n := len(o.spare); n > 0 {
			held, o.spare = o.spare[n-1], o.spare[:n-1]
		}
		if o.waiting == nil {
			o.waiting = make(map[uint64][]AuditEntry)
		}
		o.waiting[t] = appendAudits(held, ops)
		return
	}
	publishAudits(e, ops)
	for o.next++; ; o.next++ {
		held, ok := o.waiting[o.next]
		if !ok {
			return
		}
		delete(o.waiting, o.next)
		e.publish(held) // it copies the entries out
		if cap(held) > 0 && cap(held) <= spareEntries && len(o.spare) < spareBuffers {
			clear(held)
			o.spare = append(o.spare, held[:0])
		}
	}
}

// audits yields the audit entries of ops, and of the operations of a
// batch among them, in order.
func audits(ops []*pending) iter.Seq[[]AuditEntry] {
	return func(yield func([]AuditEntry) bool) {
		for _, p := range ops {
			if r := p.scope.batch; r != nil {
				for _, q := range r.b.ops {
					if !yield(q.op.audit) {
						return
					}
				}
				continue
			}
			if !yield(p.op.audit) {
				return
			}
		}
	}
}

// publishAudits publishes the audit entries of ops.
func publishAudits(e *events, ops []*pending) {
	for entries := range audits(ops) {
		e.publish(entries)
	}
}

// appendAudits appends the audit entries of ops to dst.
func appendAudits(dst []AuditEntry, ops []*pending) []AuditEntry {
	for entries := range audits(ops) {
		dst = append(dst, entries...)
	}
	return dst
}
