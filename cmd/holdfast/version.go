package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

type versionCommand struct {
	stdout io.Writer
}

func newVersionCommand(stdout io.Writer) *versionCommand {
	return &versionCommand{stdout: stdout}
}

func (c *versionCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 {
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
