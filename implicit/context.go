package implicit

import (
	"context"

	"github.com/holdfast/holdfast"
)

type ctxKey int

const (
	ownerKey ctxKey = iota
	tokenKey
	grantKey
)

// WithOwner returns ctx carrying the owner that repositories lock for. The
// httplock middleware sets it for every request; background jobs set it
// themselves.
func WithOwner(ctx context.Context, o holdfast.Owner) context.Context {
	return context.WithValue(ctx, ownerKey, o)
}

// OwnerFrom returns the owner carried by ctx.
func OwnerFrom(ctx context.Context) (holdfast.Owner, bool) {
	o, ok := ctx.Value(ownerKey).(holdfast.Owner)
	return o, ok && o.Session != ""
}

// WithToken returns ctx carrying the fencing token of the grant an edit
// page was opened under, so that Update and Delete verify that exact grant
// and not merely some lock of the session.
func WithToken(ctx context.Context, token uint64) context.Context {
	return context.WithValue(ctx, tokenKey, token)
}

// TokenFrom returns the token set by WithToken, or 0.
func TokenFrom(ctx context.Context) uint64 {
	t, _ := ctx.Value(tokenKey).(uint64)
	return t
}

// GrantFrom returns the verified lock under which a decorated Update or
// Delete calls the wrapped repository. Repositories that can, store
// Grant.Token with the row and refuse a write with a smaller one, so that a
// write from a holder who lost the lock can never land after a newer
// holder's (fencing).
func GrantFrom(ctx context.Context) (holdfast.Lock, bool) {
	l, ok := ctx.Value(grantKey).(holdfast.Lock)
	return l, ok
}
