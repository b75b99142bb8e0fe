package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/holdfast/holdfast"
)

const breakHelp = `
Usage: holdfast break KEY... --reason R [--session S] [--actor A]

Force-releases locks (admin role): those on every KEY, or all of session
S's, or S's locks on the KEYs when both are given. The reason is required;
it is written to the audit log and told to the former holder at its next
renew, verify or heartbeat.

Example:
  holdfast break policy/12345 --reason "Bob is on leave" --actor alice
`

type breakCommand struct {
	stdout, stderr io.Writer
}

func newBreakCommand(stdout, stderr io.Writer) *breakCommand {
	return &breakCommand{stdout: stdout, stderr: stderr}
}

func (c *breakCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("break", breakHelp)
	var conn connection
	conn.register(fs)
	var req holdfast.ForceReleaseRequest
	fs.StringVar(&req.Reason, "reason", "", "why the locks are broken (required)")
	fs.StringVar(&req.Session, "session", "", "break this session's locks")
	fs.StringVar(&req.Actor, "actor", currentUser(), "who breaks them, for the audit log")
	keys, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case req.Reason == "":
		return usagef("break: --reason is required: say why, the holder and the audit log are told")
	case len(keys) == 0 && req.Session == "":
		return usagef("break: give the KEYs to force-release, or --session")
	}
	req.Keys = keys
	cl, err := conn.client()
	if err != nil {
		return err
	}
	res, err := cl.ForceRelease(ctx, req)
	if err != nil {
		return err
	}
	if len(res.Released) == 0 {
		fmt.Fprintln(c.stdout, "Nothing was held; nothing released.")
		return nil
	}
	fmt.Fprintf(c.stdout, "Force-released %d lock(s):\n", len(res.Released))
	printLocks(c.stdout, res.Released)
	return nil
}

// currentUser names the person at the keyboard, for the audit log.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}
