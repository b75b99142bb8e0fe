package main

import (
	"context"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
)

const endSessionHelp = `
Usage: holdfast end-session S

Ends session S and releases all its locks, as a logout does. Ending an
unknown or already ended session is not an error.

Example:
  holdfast end-session s-81
`

type endSessionCommand struct {
	stdout, stderr io.Writer
}

func newEndSessionCommand(stdout, stderr io.Writer) *endSessionCommand {
	return &endSessionCommand{stdout: stdout, stderr: stderr}
}

func (c *endSessionCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("end-session", endSessionHelp)
	var conn connection
	conn.register(fs)
	sessions, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(sessions) != 1 {
		return usagef("end-session: exactly one session is required")
	}
	cl, err := conn.client()
	if err != nil {
		return err
	}
	res, err := cl.EndSession(ctx, holdfast.EndSessionRequest{Session: sessions[0]})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Session %s ended; %d lock(s) released.\n", sessions[0], len(res.Released))
	if len(res.Released) > 0 {
		printLocks(c.stdout, res.Released)
	}
	return nil
}
