package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/holdfast/holdfast/client"
)

const defaultServer = "http://127.0.0.1:7070"

// newFlagSet makes a command's flag set whose -h prints the synopsis and
// example first.
func newFlagSet(stderr io.Writer, name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\nFlags:\n", strings.TrimSpace(help)+"\n")
		fs.PrintDefaults()
	}
	return fs
}

// connection holds the flags every client command shares.
type connection struct {
	server string
	token  string
}

func (c *connection) register(fs *flag.FlagSet) {
	server := os.Getenv("HOLDFAST_SERVER")
	if server == "" {
		server = defaultServer
	}
	fs.StringVar(&c.server, "server", server, "server URL (env HOLDFAST_SERVER)")
	// The environment is read late so that -h never prints a secret.
	fs.StringVar(&c.token, "token", "", "bearer token (default: env HOLDFAST_TOKEN)")
}

func (c *connection) client() (*client.Client, error) {
	if c.token == "" {
		c.token = os.Getenv("HOLDFAST_TOKEN")
	}
	cl, err := client.New(client.Config{BaseURL: c.server, Token: c.token, UserAgent: "holdfast-cli"})
	if err != nil {
		return nil, &usageError{msg: err.Error()}
	}
	return cl, nil
}

// parseArgs parses flags wherever they stand among the positional
// arguments, so that "holdfast lock policy/1 --session s" works as well as
// the flags-first order of the flag package. Everything after "--" is
// returned unparsed as rest.
func parseArgs(fs *flag.FlagSet, args []string) (positional, rest []string, err error) {
	var flags []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			rest = args[i+1:]
			i = len(args)
		case len(arg) > 1 && arg[0] == '-':
			flags = append(flags, arg)
			name := strings.TrimLeft(arg, "-")
			if strings.Contains(name, "=") {
				continue
			}
			f := fs.Lookup(name)
			if f == nil || isBoolFlag(f) || i+1 == len(args) {
				continue // Parse reports what is wrong
			}
			i++
			flags = append(flags, args[i])
		default:
			positional = append(positional, arg)
		}
	}
	if err := fs.Parse(flags); err != nil {
		if err == flag.ErrHelp {
			return nil, nil, err
		}
		return nil, nil, errUsageShown
	}
	return positional, rest, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
