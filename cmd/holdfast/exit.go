package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
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

// flagError is a command line that the flag package refused, or -h.
type flagError struct {
	fs  *flag.FlagSet
	err error
}

func (e *flagError) Error() string { return e.err.Error() }

// exitStatus ends the process with a code without a message: the exit
// status of the command that "holdfast run" ran.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// report tells the user what went wrong, with what they need to act on it,
// and returns the exit code. Help asked for with -h goes to stdout.
func report(stdout, stderr io.Writer, err error) int {
	var (
		flags       *flagError
		usage       *usageError
		status      exitStatus
		locked      *holdfast.LockedError
		lost        *holdfast.LockLostError
		unreachable *client.UnreachableError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &flags) && errors.Is(flags.err, flag.ErrHelp):
		flags.fs.SetOutput(stdout)
		flags.fs.Usage()
		return exitOK
	case errors.As(err, &flags):
		fmt.Fprintf(stderr, "holdfast: %s: %s\n\n", flags.fs.Name(), flags.err)
		flags.fs.SetOutput(stderr)
		flags.fs.Usage()
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
	case errors.As(err, &unreachable):
		fmt.Fprintf(stderr, "holdfast: %s\nIs \"holdfast serve\" running there? If the server is elsewhere, give its URL with --server or HOLDFAST_SERVER.\n", err)
		return exitUnavailable
	case errors.Is(err, holdfast.ErrUnavailable):
		fmt.Fprintf(stderr, "holdfast: %s\n", err)
		return exitUnavailable
	case errors.Is(err, holdfast.ErrInvalid):
		fmt.Fprintf(stderr, "holdfast: the server refused the request: %s\n", err)
		return exitUsage
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
