package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
)

const unlockHelp = `
Usage: holdfast unlock KEY... --session S [--fencing-token N]

Releases session S's locks on every KEY. Releasing what S does not hold is
not an error; it is reported, with why when the server knows (an
administrator broke the lock: who, when and why). With --fencing-token (one KEY only), the lock
is released only if N is still its current token (the TOKEN column of
"holdfast ls"); otherwise nothing is released and the exit code is 3.

Example:
  holdfast unlock policy/12345 --session s-81
`

type unlockCommand struct {
	stdout, stderr io.Writer
}

func newUnlockCommand(stdout, stderr io.Writer) *unlockCommand {
	return &unlockCommand{stdout: stdout, stderr: stderr}
}

func (c *unlockCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("unlock", unlockHelp)
	var conn connection
	conn.register(fs)
	var req holdfast.ReleaseRequest
	fs.StringVar(&req.Session, "session", "", "session that holds the locks (required)")
	fs.Uint64Var(&req.Token, "fencing-token", 0, "release only if this is the lock's current fencing token")
	keys, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return usagef("unlock: at least one KEY is required")
	case req.Session == "":
		return usagef("unlock: --session is required")
	case req.Token != 0 && len(keys) != 1:
		return usagef("unlock: --fencing-token needs exactly one KEY")
	}
	req.Keys = keys
	cl, err := conn.client()
	if err != nil {
		return err
	}
	res, err := cl.Release(ctx, req)
	if err != nil {
		return err
	}
	for _, l := range res.Released {
		fmt.Fprintf(c.stdout, "released %s (token %d)\n", l.Key, l.Token)
	}
	for _, k := range res.NotHeld {
		fmt.Fprintf(c.stderr, "holdfast: %s\n", notHeld(ctx, cl, k, req.Session))
	}
	return nil
}

// notHeld says that session did not hold key, in the server's words when
// it knows why: a lock broken by an administrator, say, with who, when
// and why.
func notHeld(ctx context.Context, cl holdfast.Service, key, session string) string {
	_, err := cl.Verify(ctx, holdfast.VerifyRequest{Key: key, Session: session})
	var lost *holdfast.LockLostError
	if errors.As(err, &lost) && lost.Reason != holdfast.LostNeverHeld && lost.Message != "" {
		return lost.Message
	}
	return key + " was not held by session " + session
}
