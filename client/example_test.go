package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// An editor locks a record before loading it, tells the user who holds it
// when it is refused, and verifies the grant right before saving.
func Example() {
	ctx := context.Background()
	var svc holdfast.Service // or an in-process *holdfast.Manager
	svc, err := client.New(client.Config{BaseURL: "http://127.0.0.1:7070", Token: os.Getenv("HOLDFAST_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	owner := holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"}
	res, err := svc.Acquire(ctx, holdfast.AcquireRequest{
		Keys: []string{"policy/12345"}, Owner: owner, TTL: holdfast.Duration(2 * time.Hour)})
	var locked *holdfast.LockedError
	switch {
	case errors.As(err, &locked):
		// "policy/12345 is being edited by Alice Jones since 10:47 UTC (until 12:47 UTC)"
		fmt.Println(locked.Message)
		return
	case errors.Is(err, holdfast.ErrUnavailable):
		fmt.Println("the lock service is unavailable; nothing was locked, try again")
		return
	case err != nil:
		log.Fatal(err)
	}
	token := res.Locks[0].Token

	// ... load the record, let the user edit it for forty minutes ...

	_, err = svc.Verify(ctx, holdfast.VerifyRequest{Key: "policy/12345", Session: owner.Session, Token: token})
	var lost *holdfast.LockLostError
	if errors.As(err, &lost) {
		fmt.Printf("not saved: the lock was lost (%s)\n", lost.Reason)
		return
	}
	// ... save, then release ...
	svc.Release(ctx, holdfast.ReleaseRequest{Session: owner.Session, Keys: []string{"policy/12345"}})
}

// A Go application server heartbeats all of its open editors in one request.
func ExampleClient_Batch() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:7070"})
	if err != nil {
		log.Fatal(err)
	}
	var ops []client.Op
	for _, session := range []string{"s-81", "s-82", "s-83"} {
		ops = append(ops, client.HeartbeatOp(holdfast.HeartbeatRequest{Session: session}))
	}
	results, err := c.Batch(context.Background(), ops)
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		if r.Err != nil {
			fmt.Printf("%d: %v\n", i, r.Err)
			continue
		}
		for _, l := range r.Heartbeat.Lost {
			fmt.Printf("session %s lost %s: %s\n", r.Heartbeat.Session.ID, l.Lock.Key, l.Reason)
		}
	}
}

// Following lock changes, resuming after a broken connection.
func ExampleClient_Events() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:7070"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lastID := ""
	for {
		s, err := c.Events(ctx, "policy", lastID)
		if err != nil {
			log.Fatal(err)
		}
		for s.Next() {
			e := s.Entry()
			fmt.Printf("%s %s by %s\n", e.Event, e.Lock.Key, e.Lock.Owner.Name)
		}
		lastID = s.LastEventID()
		if !errors.Is(s.Err(), holdfast.ErrUnavailable) {
			log.Fatal(s.Err())
		}
		s.Close()
		time.Sleep(time.Second)
	}
}
