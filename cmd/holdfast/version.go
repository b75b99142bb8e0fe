package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionHelp = `
Usage: holdfast version

Prints holdfast's version, the commit it was built from, and the Go
version and platform it was built with.

Example:
  holdfast version
`

type versionCommand struct {
	stdout io.Writer
}

func newVersionCommand(stdout io.Writer) *versionCommand {
	return &versionCommand{stdout: stdout}
}

func (c *versionCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("version", versionHelp)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version takes no arguments")
	}
	version, vcs := "unknown", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
		settings := make(map[string]string)
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			vcs = " (" + rev[:min(12, len(rev))]
			if t := settings["vcs.time"]; t != "" {
				vcs += ", " + t
			}
			if settings["vcs.modified"] == "true" {
				vcs += ", modified"
			}
			vcs += ")"
		}
	}
	fmt.Fprintf(c.stdout, "holdfast %s%s\n%s %s/%s\n", version, vcs, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
