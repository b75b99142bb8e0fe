// Package implicit applies holdfast locks to an application's repositories
// so that no code path can forget them (Implicit Lock, PoEAA ch. 16): a
// decorated repository takes or verifies the lock its record type's policy
// asks for on every find, update and delete.
//
// The owner comes from the context (WithOwner; the httplock middleware sets
// it per request). Everything works against any holdfast.Service: the
// in-process *holdfast.Manager or the HTTP client.
package implicit

import (
	"context"
	"errors"
	"fmt"

	"github.com/holdfast/holdfast"
)

// Finder loads one record by id.
type Finder[ID comparable, T any] interface {
	Find(ctx context.Context, id ID) (T, error)
}

// Updater writes one record. Inside a decorated Update, GrantFrom(ctx)
// returns the verified lock.
type Updater[ID comparable, T any] interface {
	Update(ctx context.Context, id ID, v T) error
}

// Deleter deletes one record. Inside a decorated Delete, GrantFrom(ctx)
// returns the verified lock.
type Deleter[ID comparable] interface {
	Delete(ctx context.Context, id ID) error
}

// Repository is what an application hands over to be decorated.
type Repository[ID comparable, T any] interface {
	Finder[ID, T]
	Updater[ID, T]
	Deleter[ID]
}

// ErrNoOwner is returned when a repository call that needs a lock finds no
// owner in its context. It is a programming error: the request did not go
// through the middleware, or a job forgot WithOwner.
var ErrNoOwner = errors.New("implicit: no lock owner in the context")

// Repo is a repository whose every call applies its record type's policy:
//
//	policy           Find                 Edit        Update / Delete
//	exclusive-write  no lock              exclusive   verify the caller's lock
//	exclusive-read   exclusive            exclusive   verify the caller's lock
//	read-write       shared               exclusive   verify, upgrade shared to exclusive
//
// Update and Delete never take a lock the caller did not already hold: a
// write lock acquired at save time fails late, after the work is done,
// which is what pessimistic locking exists to prevent. Obtain a Repo from a
// Registry.
type Repo[ID comparable, T any] struct {
	inner  Repository[ID, T]
	svc    holdfast.Service
	typ    string
	policy holdfast.Policy
}

// Type is the record type: the first segment of every key of this Repo.
func (r *Repo[ID, T]) Type() string { return r.typ }

// Policy is the record type's policy.
func (r *Repo[ID, T]) Policy() holdfast.Policy { return r.policy }

// Key is the lock key of the record with id, e.g. "policy/42".
func (r *Repo[ID, T]) Key(id ID) string { return r.typ + "/" + fmt.Sprint(id) }

// Find loads a record for reading, after taking the lock the policy asks
// for on reads (none under exclusive-write).
func (r *Repo[ID, T]) Find(ctx context.Context, id ID) (T, error) {
	var zero T
	switch r.policy {
	case holdfast.ExclusiveRead:
		if _, err := r.acquire(ctx, r.Key(id), holdfast.Exclusive, EditOptions{}); err != nil {
			return zero, err
		}
	case holdfast.ReadWrite:
		if _, err := r.acquire(ctx, r.Key(id), holdfast.Shared, EditOptions{}); err != nil {
			return zero, err
		}
	}
	return r.inner.Find(ctx, id)
}

// EditOptions qualify Edit.
type EditOptions struct {
	// Takeover takes the lock over from other sessions of the same user
	// (another tab or device).
	Takeover bool
	// Note is shown to others with the lock.
	Note string
}

// Edit starts editing: it acquires the exclusive lock first and only then
// loads the record, so the editor sees the latest committed data. A refusal
// is a *holdfast.LockedError naming the holders; nothing is loaded then.
func (r *Repo[ID, T]) Edit(ctx context.Context, id ID, opt EditOptions) (T, holdfast.Lock, error) {
	var zero T
	l, err := r.acquire(ctx, r.Key(id), holdfast.Exclusive, opt)
	if err != nil {
		return zero, holdfast.Lock{}, err
	}
	v, err := r.inner.Find(ctx, id)
	if err != nil {
		return zero, holdfast.Lock{}, err
	}
	return v, l, nil
}

// Update writes v after verifying that the caller holds the record's lock
// (the grant of TokenFrom(ctx), when set). Under read-write a shared lock is
// upgraded to exclusive first.
func (r *Repo[ID, T]) Update(ctx context.Context, id ID, v T) error {
	ctx, err := r.verify(ctx, r.Key(id))
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	return r.inner.Update(ctx, id, v)
}

// Delete deletes the record after the same check as Update.
func (r *Repo[ID, T]) Delete(ctx context.Context, id ID) error {
	ctx, err := r.verify(ctx, r.Key(id))
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return r.inner.Delete(ctx, id)
}

// Release gives up the caller's lock on the record (save or cancel).
// Releasing a lock that is not held is not an error.
func (r *Repo[ID, T]) Release(ctx context.Context, id ID) error {
	o, ok := OwnerFrom(ctx)
	if !ok {
		return ErrNoOwner
	}
	_, err := r.svc.Release(ctx, holdfast.ReleaseRequest{Session: o.Session, Keys: []string{r.Key(id)}})
	return err
}

// Holders lists the locks that decide about the record: on it, on what
// covers it (its aggregate root, an ancestor key) and below it.
func (r *Repo[ID, T]) Holders(ctx context.Context, id ID) ([]holdfast.Lock, error) {
	page, err := r.svc.Locks(ctx, holdfast.LockQuery{Key: r.Key(id)})
	if err != nil {
		return nil, err
	}
	return page.Locks, nil
}

func (r *Repo[ID, T]) acquire(ctx context.Context, key string, mode holdfast.Mode, opt EditOptions) (holdfast.Lock, error) {
	o, ok := OwnerFrom(ctx)
	if !ok {
		return holdfast.Lock{}, ErrNoOwner
	}
	res, err := r.svc.Acquire(ctx, holdfast.AcquireRequest{
		Keys: []string{key}, Mode: mode, Owner: o, Takeover: opt.Takeover, Note: opt.Note,
	})
	if err != nil {
		return holdfast.Lock{}, err
	}
	if len(res.Locks) != 1 {
		return holdfast.Lock{}, fmt.Errorf("implicit: acquire %s returned %d locks", key, len(res.Locks))
	}
	return res.Locks[0], nil
}

// verify checks that the caller holds key and returns ctx carrying the
// grant for the wrapped repository.
func (r *Repo[ID, T]) verify(ctx context.Context, key string) (context.Context, error) {
	o, ok := OwnerFrom(ctx)
	if !ok {
		return ctx, ErrNoOwner
	}
	res, err := r.svc.Verify(ctx, holdfast.VerifyRequest{Key: key, Session: o.Session, Token: TokenFrom(ctx)})
	if err != nil {
		return ctx, err
	}
	grant := res.Lock
	if grant.Mode == holdfast.Shared {
		// The reader becomes the writer; other readers make this fail
		// now, with their names, and the caller keeps the shared lock.
		if grant, err = r.acquire(ctx, key, holdfast.Exclusive, EditOptions{}); err != nil {
			return ctx, err
		}
	}
	return context.WithValue(ctx, grantKey, grant), nil
}
