package main

import (
	"context"
	"fmt"
	"io"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

const listHelp = `
Usage: holdfast ls [--prefix P] [--session S] [--user U] [--limit N] [--json]

Lists live locks, sorted by key then session: all of them, or the first N
with --limit.

Example:
  holdfast ls --prefix policy/ --user u-7
`

type listCommand struct {
	stdout, stderr io.Writer
}

func newListCommand(stdout, stderr io.Writer) *listCommand {
	return &listCommand{stdout: stdout, stderr: stderr}
}

func (c *listCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("ls", listHelp)
	var conn connection
	conn.register(fs)
	var q holdfast.LockQuery
	fs.StringVar(&q.Prefix, "prefix", "", "only P and the keys below it (policy lists policy/1, not policyholder/1)")
	fs.StringVar(&q.Session, "session", "", "only locks of session S")
	fs.StringVar(&q.User, "user", "", "only locks of user U")
	limit := fs.Int("limit", 0, "list at most N locks (default: all)")
	asJSON := fs.Bool("json", false, "print the locks as JSON")
	rest, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("ls: unexpected argument %q (filter with --prefix)", rest[0])
	}
	if *limit < 0 {
		return usagef("ls: --limit must not be negative")
	}
	cl, err := conn.client()
	if err != nil {
		return err
	}
	locks, err := allLocks(ctx, cl, q, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.stdout, struct {
			Locks []holdfast.Lock `json:"locks"`
		}{locks})
	}
	if len(locks) == 0 {
		fmt.Fprintln(c.stdout, "No locks.")
		return nil
	}
	printLocks(c.stdout, locks)
	return nil
}

// maxPage is the largest page the API serves.
const maxPage = 1000

// allLocks follows the pages of a listing until it ends or limit locks
// (0: no limit) are read.
func allLocks(ctx context.Context, cl *client.Client, q holdfast.LockQuery, limit int) ([]holdfast.Lock, error) {
	locks := []holdfast.Lock{}
	for {
		q.Limit = maxPage
		if limit > 0 {
			q.Limit = min(maxPage, limit-len(locks))
		}
		page, err := cl.Locks(ctx, q)
		if err != nil {
			return nil, err
		}
		locks = append(locks, page.Locks...)
		if page.Next == nil || *page.Next == "" || len(page.Locks) == 0 || (limit > 0 && len(locks) >= limit) {
			return locks, nil
		}
		q.After = *page.Next
	}
}
