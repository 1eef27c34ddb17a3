package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// run is the whole CLI, with its I/O passed in so tests can drive it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "tandem",
		Short:         "MCP server for shared, audited shell sessions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(serveCmd(stdin, stdout, stderr), initCmd(stdout), versionCmd(stdout), auditCmd(stdout), sandboxCmd(stdout), tokenCmd(stdout), dashboardURLCmd(), attachCmd(stdin, stdout, stderr))
	return root.ExecuteContext(ctx)
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tandem's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(stdout, "tandem", versionOf(version, bi))
			return err
		},
	}
}

// versionOf says which tandem this is: the version stamped at link time,
// else the module version the go command recorded, followed by the VCS
// revision it was built from (and whether the tree had changes), so that
// a bug report names the exact code even for a build from a checkout.
func versionOf(stamped string, bi *debug.BuildInfo) string {
	v := stamped
	if bi == nil {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return v + " (no VCS revision recorded: built with go run or outside a git checkout)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	extra := "revision " + rev
	if when != "" {
		extra += ", " + when
	}
	if modified {
		extra += ", with uncommitted changes"
	}
	return v + " (" + extra + ")"
}
