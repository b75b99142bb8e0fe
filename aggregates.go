package holdfast

import (
	"context"

	"github.com/holdfast/holdfast/store"
)

// SetAggregate maps member onto root: from now on a request naming member
// (or a key below it) is applied to root (or the same path below root).
// A mapping that would make a cycle is refused.
func (m *Manager) SetAggregate(ctx context.Context, a Aggregate) (*Aggregate, error) {
	if err := ValidateKey(a.Member); err != nil {
		return nil, invalid("member", "member: %v", err)
	}
	if err := ValidateKey(a.Root); err != nil {
		return nil, invalid("root", "root: %v", err)
	}
	err := m.update(ctx, "set_aggregate", func(o *op) error {
		resolved, err := o.resolve("root", a.Root)
		if err != nil {
			return err
		}
		if Covers(a.Member, resolved) {
			return invalid("root", "mapping %s to %s would make a cycle (%s resolves to %s)", a.Member, a.Root, a.Root, resolved)
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
	return m.update(ctx, "remove_aggregate", func(o *op) error {
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
