// Command tandem is an MCP server that gives AI agents isolated shell
// sessions a human can watch and type into from a browser.
//
// This package is the command line only: flags, subcommands and the
// parsing of their arguments. A serving tandem is internal/server.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tandem-sh/tandem/internal/sandbox"
)

func main() {
	// The sandbox launcher re-executes tandem; it must not reach cobra.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ArgName {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	// Descriptors a client leaked to tandem (a file, a socket) must never
	// reach a shell: mark them close-on-exec before anything starts one.
	if err := sandbox.MarkInheritedCloseOnExec(); err != nil {
		fmt.Fprintln(os.Stderr, "tandem: close inherited descriptors:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tandem:", err)
		os.Exit(1)
	}
}
