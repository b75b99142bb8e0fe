package main

import (
	"context"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
)

const lockHelp = `
Usage: holdfast lock KEY... --session S [--user U] [--name N] [--ttl 2h] [--shared] [--note T] [--takeover]

Acquires locks on every KEY for session S, all or nothing. If another
session holds one of them, nothing is taken, the holders are printed and
the exit code is 2. Re-locking what S already holds succeeds and keeps its
fencing token.

Example:
  holdfast lock policy/12345 --session s-81 --user u-7 --name "Bob Smith" --ttl 90m --note "underwriting review"
`

type lockCommand struct {
	stdout, stderr io.Writer
}

func newLockCommand(stdout, stderr io.Writer) *lockCommand {
	return &lockCommand{stdout: stdout, stderr: stderr}
}

func (c *lockCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("lock", lockHelp)
	var conn connection
	conn.register(fs)
	var (
		req    holdfast.AcquireRequest
		shared bool
		intent string
		asJSON bool
	)
	fs.StringVar(&req.Owner.Session, "session", "", "session that holds the locks (required)")
	fs.StringVar(&req.Owner.User, "user", "", "stable user id of the holder")
	fs.StringVar(&req.Owner.Name, "name", "", "holder's name as other people see it")
	ttl := fs.Duration("ttl", 0, "lifetime of the locks, like 90s or 2h (default: the type's, 2h unless configured)")
	idle := fs.Duration("idle-timeout", 0, "end the session when it is idle this long")
	fs.BoolVar(&shared, "shared", false, "take shared locks instead of exclusive ones")
	fs.StringVar(&intent, "intent", "", "read or write: let the type's policy choose the mode")
	fs.StringVar(&req.Note, "note", "", "note shown to others with the lock")
	fs.BoolVar(&req.Takeover, "takeover", false, "take over conflicting locks held by the same --user in other sessions")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	keys, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return usagef("lock: at least one KEY is required")
	case req.Owner.Session == "":
		return usagef("lock: --session is required")
	case shared && intent != "":
		return usagef("lock: give --shared or --intent, not both")
	case intent != "" && intent != string(holdfast.IntentRead) && intent != string(holdfast.IntentWrite):
		return usagef("lock: --intent must be read or write")
	case *ttl < 0 || *idle < 0:
		return usagef("lock: durations must be positive")
	}
	req.Keys = keys
	req.Intent = holdfast.Intent(intent)
	if shared {
		req.Mode = holdfast.Shared
	}
	req.TTL = holdfast.Duration(*ttl)
	req.IdleTimeout = holdfast.Duration(*idle)

	cl, err := conn.client()
	if err != nil {
		return err
	}
	res, err := cl.Acquire(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.stdout, res)
	}
	if len(res.Locks) == 0 {
		fmt.Fprintf(c.stdout, "No lock taken: the policy of this type takes no lock to read.\n")
		if len(res.Holders) > 0 {
			fmt.Fprintln(c.stdout, "Current holders:")
			printLocks(c.stdout, res.Holders)
		}
		return nil
	}
	printLocks(c.stdout, res.Locks)
	return nil
}
