package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
)

// Exit codes, as documented in the usage text.
const (
	exitOK          = 0
	exitError       = 1
	exitLocked      = 2
	exitLockLost    = 3
	exitUnavailable = 4
	exitDenied      = 5
	exitUsage       = 64
	// exitInterrupted is what shells report for a process ended by SIGINT.
	exitInterrupted = 130
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errUsageShown is returned when the flag package has already told the
// user what is wrong.
var errUsageShown = errors.New("usage shown")

// exitStatus ends the process with a code without a message: the exit
// status of the command that "holdfast run" ran.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// report tells the user what went wrong, with what they need to act on it,
// and returns the exit code.
func report(stderr io.Writer, err error) int {
	var (
		usage  *usageError
		status exitStatus
		locked *holdfast.LockedError
		lost   *holdfast.LockLostError
	)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsageShown):
		return exitUsage
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "holdfast: %s\n", usage.msg)
		return exitUsage
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &locked):
		printLocked(stderr, locked)
		return exitLocked
	case errors.As(err, &lost):
		fmt.Fprintf(stderr, "holdfast: lock lost (%s): %s\n", lost.Reason, err)
		return exitLockLost
	case errors.Is(err, holdfast.ErrStaleToken):
		fmt.Fprintf(stderr, "holdfast: stale fencing token: %s\n", err)
		return exitLockLost
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "holdfast: interrupted")
		return exitInterrupted
	case errors.Is(err, holdfast.ErrUnavailable):
		fmt.Fprintf(stderr, "holdfast: %s\n", err)
		return exitUnavailable
	case errors.Is(err, holdfast.ErrUnauthenticated), errors.Is(err, holdfast.ErrForbidden):
		fmt.Fprintf(stderr, "holdfast: %s (set --token or HOLDFAST_TOKEN to a token with the needed role)\n", err)
		return exitDenied
	default:
		fmt.Fprintf(stderr, "holdfast: %s\n", err)
		return exitError
	}
}

// printLocked says who holds what was asked for, and how to get it.
func printLocked(w io.Writer, e *holdfast.LockedError) {
	fmt.Fprintf(w, "holdfast: %s\n\n", e.Message)
	var holders []holdfast.Lock
	seen := make(map[[2]string]bool)
	for _, c := range e.Conflicts {
		for _, h := range c.Holders {
			if id := [2]string{h.Key, h.Owner.Session}; !seen[id] {
				seen[id] = true
				holders = append(holders, h)
			}
		}
	}
	printLocks(w, holders)
	fmt.Fprint(w, `
To get it: wait until it is released or expires, or ask the holder;
if it is your own lock from another session, lock again with --takeover
(and the same --user); otherwise an admin can run
  holdfast break KEY --reason "..."
`)
}
