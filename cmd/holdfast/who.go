package main

import (
	"context"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
)

const whoHelp = `
Usage: holdfast who KEY [--json]

Says who holds KEY and what covers it: locks on KEY itself, on a key above
it (order/42 covers order/42/line/7) and on keys below it, all of which
would block an exclusive lock on KEY by another session.

Example:
  holdfast who policy/12345
`

type whoCommand struct {
	stdout, stderr io.Writer
}

func newWhoCommand(stdout, stderr io.Writer) *whoCommand {
	return &whoCommand{stdout: stdout, stderr: stderr}
}

func (c *whoCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("who", whoHelp)
	var conn connection
	conn.register(fs)
	asJSON := fs.Bool("json", false, "print the locks as JSON")
	keys, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(keys) != 1 {
		return usagef("who: exactly one KEY is required")
	}
	key := keys[0]
	cl, err := conn.client()
	if err != nil {
		return err
	}
	locks, err := allLocks(ctx, cl, holdfast.LockQuery{Key: key}, 0)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, struct {
			Locks []holdfast.Lock `json:"locks"`
		}{locks})
	}
	if len(locks) == 0 {
		fmt.Fprintf(c.stdout, "%s is free: no lock is held on it, above it or below it.\n", key)
		return nil
	}
	for _, l := range locks {
		fmt.Fprintln(c.stdout, describeLock(key, l))
	}
	fmt.Fprintln(c.stdout)
	printLocks(c.stdout, locks)
	return nil
}

// describeLock says in one sentence how l bears on key.
func describeLock(key string, l holdfast.Lock) string {
	verb := "edited"
	if l.Mode == holdfast.Shared {
		verb = "read (shared)"
	}
	who, ids := holder(l.Owner), fmt.Sprintf("session %s, token %d", l.Owner.Session, l.Token)
	if who == "-" {
		who, ids = "session "+l.Owner.Session, fmt.Sprintf("token %d", l.Token)
	}
	var subject string
	switch {
	case l.Key == key:
		subject = key + " is being " + verb + " by " + who
	case holdfast.Covers(l.Key, key):
		subject = key + " is covered by " + l.Key + ", being " + verb + " by " + who
	case holdfast.Covers(key, l.Key):
		subject = l.Key + ", below " + key + ", is being " + verb + " by " + who
	default: // key is a member of an aggregate locked at its root
		subject = key + " is part of " + l.Key + ", being " + verb + " by " + who
	}
	s := fmt.Sprintf("%s since %s, until %s at the latest (%s).",
		subject, clockNow(l.AcquiredAt), clockNow(l.ExpiresAt), ids)
	if l.Note != "" {
		s += fmt.Sprintf(" Note: %q.", l.Note)
	}
	return s
}
