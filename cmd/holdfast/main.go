// Command holdfast runs the holdfast lock server and talks to it: lock and
// unlock records, list and explain locks, force-release them, and run a
// command while holding a lock.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `holdfast: pessimistic offline locks for business records.

Usage:
  holdfast serve [--listen 127.0.0.1:7070] [--store DSN] [--config FILE]
  holdfast migrate --store postgres://… [--schema holdfast]
  holdfast protect --store postgres://… --table T --key EXPR [--schema holdfast]
  holdfast unprotect --store postgres://… --table T
  holdfast lock KEY... --session S [--user U] [--name N] [--ttl 2h] [--shared] [--note T] [--takeover]
  holdfast unlock KEY... --session S [--fencing-token N]
  holdfast ls [--prefix P] [--session S] [--user U] [--limit N]
  holdfast who KEY
  holdfast break KEY... --reason R [--session S] [--actor A]
  holdfast end-session S
  holdfast run KEY... [--session S] [--ttl 1m] -- COMMAND [ARG...]
  holdfast version
  holdfast bench [--workloads cycle,hot,...] [--postgres DSN] [--redis ADDR] [--etcd ADDR]

Every client command takes --server URL (default $HOLDFAST_SERVER, else
http://127.0.0.1:7070) and --token T (default $HOLDFAST_TOKEN).
Run "holdfast COMMAND -h" for a command's flags and an example.

Exit codes:
  0   done
  1   any other error
  2   locked: another session holds the lock (the holders are printed)
  3   lock lost: the lock expired, was released, force-released or taken over
  4   the server or its store is unavailable; retry later
  5   not authenticated or not allowed (check --token)
  64  wrong usage: a flag, argument or setting is missing or wrong, or the
      server refused the request as invalid (a key that starts with /, say)
  130 interrupted (Ctrl-C)
  "holdfast run" exits with its command's status (128+N if killed by signal N),
  127 if the command is not found, 126 if it cannot be run
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks for a graceful end; a second one ends the
		// process at once, as if holdfast did not catch signals.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand.
type command interface {
	Run(ctx context.Context, args []string) error
}

// run dispatches to the subcommand named by args[0] and returns the exit
// code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if args[0] != "serve" { // which logs them
		warnUnknownEnv(stderr)
	}
	var cmd command
	switch args[0] {
	case "serve":
		cmd = newServeCommand(stdout, stderr)
	case "protect":
		cmd = newProtectCommand(stdout, stderr)
	case "unprotect":
		cmd = newUnprotectCommand(stdout, stderr)
	case "migrate":
		cmd = newMigrateCommand(stdout, stderr)
	case "lock":
		cmd = newLockCommand(stdout, stderr)
	case "unlock":
		cmd = newUnlockCommand(stdout, stderr)
	case "ls":
		cmd = newListCommand(stdout, stderr)
	case "who":
		cmd = newWhoCommand(stdout, stderr)
	case "break":
		cmd = newBreakCommand(stdout, stderr)
	case "end-session":
		cmd = newEndSessionCommand(stdout, stderr)
	case "run":
		cmd = newRunCommand(stdout, stderr)
	case "version":
		cmd = newVersionCommand(stdout)
	case "bench":
		cmd = newBenchCommand(stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "holdfast: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return report(stdout, stderr, cmd.Run(ctx, args[1:]))
}
