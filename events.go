package holdfast

import "sync"

// subscriberBuffer is how far a subscriber may fall behind before it is
// dropped (its channel closed) and must resume from the audit log.
const subscriberBuffer = 1024

// events fans committed audit entries out to subscribers.
type events struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	prefix string
	ch     chan AuditEntry
}

func (e *events) subscribe(prefix string) (<-chan AuditEntry, func()) {
	s := &subscriber{prefix: prefix, ch: make(chan AuditEntry, subscriberBuffer)}
	e.mu.Lock()
	if e.subs == nil {
		e.subs = make(map[*subscriber]struct{})
	}
	e.subs[s] = struct{}{}
	e.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			e.mu.Lock()
			if _, ok := e.subs[s]; ok {
				delete(e.subs, s)
				close(s.ch)
			}
			e.mu.Unlock()
		})
	}
}

// dropAll drops every subscriber, which then resumes from the audit log:
// a transaction's outcome is unknown, and it may have committed entries
// that publish will never be given (see Manager.Subscribe).
func (e *events) dropAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.subs {
		delete(e.subs, s)
		close(s.ch)
	}
}

// publish delivers entries in order; a subscriber whose buffer is full is
// dropped rather than slowing lock operations down.
func (e *events) publish(entries []AuditEntry) {
	if len(entries) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.subs {
		for _, en := range entries {
			if !UnderPrefix(s.prefix, en.Lock.Key) {
				continue
			}
			select {
			case s.ch <- en:
			default:
				delete(e.subs, s)
				close(s.ch)
			}
			if _, ok := e.subs[s]; !ok {
				break
			}
		}
	}
}
