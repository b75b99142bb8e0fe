package holdfast

import (
	"context"

	"github.com/holdfast/holdfast/store"
)

// SetAggregate maps member onto root: from now on a request naming member
// (or a key below it) is applied to root (or the same path below root).
// A mapping that would make a cycle is refused (ErrInvalid), and so is one
// whose member is locked (ErrLocked): the lock would stop covering it.
func (m *Manager) SetAggregate(ctx context.Context, a Aggregate) (*Aggregate, error) {
	if err := ValidateKey(a.Member); err != nil {
		return nil, invalid("member", "member: %v", err)
	}
	if err := ValidateKey(a.Root); err != nil {
		return nil, invalid("root", "root: %v", err)
	}
	err := m.update(ctx, "set_aggregate", scope{keys: []string{a.Member, a.Root}}, func(o *op) error {
		resolved, err := o.resolve("root", a.Root)
		if err != nil {
			return err
		}
		if Covers(a.Member, resolved) {
			return invalid("root", "mapping %s to %s would make a cycle (%s resolves to %s)", a.Member, a.Root, a.Root, resolved)
		}
		// While a lock covers the member or is held below it, mapping the
		// member elsewhere would let another session lock the same record
		// through the root. Map members before they are locked.
		if conflicts, err := o.liveRelated(a.Member); err != nil {
			return err
		} else if len(conflicts) > 0 {
			c := []Conflict{{Key: a.Member, RequestedKey: a.Member, Holders: conflicts}}
			return &LockedError{Conflicts: c, Message: "cannot map " + a.Member + " to " + a.Root +
				" while it is locked: " + lockedMessage(c, o.now)}
		}
		return o.tx.PutAggregate(store.Aggregate{Member: a.Member, Root: a.Root})
	})
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// RemoveAggregate removes member's mapping; removing an unknown member is
// not an error.
func (m *Manager) RemoveAggregate(ctx context.Context, req RemoveAggregateRequest) error {
	if err := ValidateKey(req.Member); err != nil {
		return invalid("member", "member: %v", err)
	}
	return m.update(ctx, "remove_aggregate", scope{keys: []string{req.Member}}, func(o *op) error {
		return o.tx.DeleteAggregate(req.Member)
	})
}

// Aggregates lists the mappings onto root, or all mappings when root is "".
func (m *Manager) Aggregates(ctx context.Context, root string) (*AggregateList, error) {
	if root != "" {
		if err := ValidateKey(root); err != nil {
			return nil, invalid("root", "root: %v", err)
		}
	}
	list := &AggregateList{Aggregates: []Aggregate{}}
	err := m.view(ctx, "aggregates", func(o *readOp) error {
		as, err := o.rtx.Aggregates(root)
		if err != nil {
			return err
		}
		list.Aggregates = list.Aggregates[:0]
		for _, a := range as {
			list.Aggregates = append(list.Aggregates, Aggregate{Member: a.Member, Root: a.Root})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// liveRelated returns the live locks on key, its ancestors and its
// descendants.
func (o *readOp) liveRelated(key string) ([]Lock, error) {
	related, err := o.relatedLocks(key)
	if err != nil {
		return nil, err
	}
	var out []Lock
	for _, l := range related {
		why, err := o.deadReason(l)
		if err != nil {
			return nil, err
		}
		if why == "" {
			out = append(out, toLock(l))
		}
	}
	return out, nil
}
