package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
)

// A record is checked out to one editor; a colleague who opens it is told
// who holds it, since when and until when, before doing any work.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)
	m, err := holdfast.New(memstore.New(memstore.Config{Now: func() time.Time { return now }}), holdfast.Config{})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	bob := holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"}
	res, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/12345"}, Owner: bob})
	if err != nil {
		panic(err)
	}
	fmt.Println("Bob holds", res.Locks[0].Key, "until", res.Locks[0].ExpiresAt.Format("15:04"))

	alice := holdfast.Owner{Session: "s-90", User: "u-3", Name: "Alice Jones"}
	_, err = m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/12345"}, Owner: alice})
	var locked *holdfast.LockedError
	if errors.As(err, &locked) {
		fmt.Println(locked.Message)
	}
	// Output:
	// Bob holds policy/12345 until 12:47
	// policy/12345 is being edited by Bob Smith since 10:47 UTC (until 12:47 UTC)
}

// A verify right before a write refuses a holder whose lock was
// force-released, and says who did it and why.
func ExampleManager_Verify() {
	ctx := context.Background()
	m, _ := holdfast.New(memstore.New(memstore.Config{}), holdfast.Config{})
	defer m.Close()

	bob := holdfast.Owner{Session: "s-81", Name: "Bob Smith"}
	res, _ := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: bob})
	_, _ = m.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: []string{"policy/1"}, Reason: "Bob is on leave", Actor: "alice"})

	_, err := m.Verify(ctx, holdfast.VerifyRequest{Key: "policy/1", Session: "s-81", Token: res.Locks[0].Token})
	var lost *holdfast.LockLostError
	if errors.As(err, &lost) {
		fmt.Println(lost.Reason, "by", lost.Actor+":", lost.ForceReason)
	}
	// Output:
	// force_released by alice: Bob is on leave
}
