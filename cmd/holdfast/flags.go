package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/config"
)

const defaultServer = "http://127.0.0.1:7070"

// newFlagSet makes a command's flag set. Its Usage prints the synopsis
// and example, then the flags, to the set's output, which report chooses:
// stdout when -h asked for the help, stderr after a mistake.
func newFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // until report chooses
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), strings.TrimSpace(help))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args with fs; its error, -h included, is a
// *flagError for report.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return &flagError{fs: fs, err: err}
	}
	return nil
}

// connection holds the flags every client command shares.
type connection struct {
	flags  *flag.FlagSet
	server string
	token  string
}

func (c *connection) register(fs *flag.FlagSet) {
	c.flags = fs
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
	// Where a wrong address came from: the default is right.
	from := "HOLDFAST_SERVER"
	c.flags.Visit(func(f *flag.Flag) {
		if f.Name == "server" {
			from = "--server"
		}
	})
	if err := checkServerURL(from, c.server); err != nil {
		return nil, err
	}
	cl, err := client.New(client.Config{BaseURL: c.server, Token: c.token, UserAgent: "holdfast-cli"})
	if err != nil {
		return nil, usagef("%s: %v", from, err)
	}
	return cl, nil
}

// checkServerURL refuses a server address that is not an http or https
// URL, such as one without its scheme, saying where it came from.
func checkServerURL(from, server string) error {
	if u, err := url.Parse(server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("%s must be a URL such as %s, not %q", from, defaultServer, server)
	}
	return nil
}

// warnUnknownEnv warns of the HOLDFAST_* variables that holdfast does not
// read: most likely misspelled, and nothing else would say so.
func warnUnknownEnv(stderr io.Writer) {
	for _, name := range config.UnknownEnv(os.Environ()) {
		fmt.Fprintf(stderr, "holdfast: warning: ignoring %s, which holdfast does not read; is it misspelled? (\"holdfast -h\" and \"holdfast serve -h\" name the variables it reads)\n", name)
	}
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
	if err := parseFlags(fs, flags); err != nil {
		return nil, nil, err
	}
	return positional, rest, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
