package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/sandbox"
)

// sandboxCmd is the troubleshooting check for local targets: it asks the
// running kernel what tandem's Landlock sandbox can enforce, so a user
// need not know where (or whether) their system exposes the LSM list.
func sandboxCmd(stdout io.Writer) *cobra.Command {
	var network bool
	c := &cobra.Command{
		Use:   "sandbox",
		Short: "Report what this kernel's Landlock can enforce for a local target; exit 1 if sandboxed sessions would be refused",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := (sandbox.Policy{Network: network}).Supported()
			execErr := execguard.Available()
			if err == nil && execErr != nil {
				// Every sandboxed session's unix sockets are checked by it.
				err = fmt.Errorf("%w: tandem checks the unix sockets of every sandboxed session with seccomp user notification: %v", sandbox.ErrUnsupported, execErr)
			}
			report := sandboxReport(describeSandbox(cmd.Context(), network, os.Getenv("TANDEM_NETNS") == "off"), err, execErr)
			if _, werr := io.WriteString(stdout, report); werr != nil {
				return werr
			}
			if err != nil {
				return fmt.Errorf("sandboxed local sessions would be refused: %w", err)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&network, "network", false, "check a target with network: true")
	return c
}

// describeSandbox is what a sandboxed session would get here: with the
// network off, a network namespace of its own if this host allows one
// (probed with this binary as the launcher) and noNetNS (TANDEM_NETNS=off,
// as tandem serve reads it) does not turn them off, else the fallback
// filter.
func describeSandbox(ctx context.Context, network, noNetNS bool) sandbox.Enforcement {
	if network {
		return sandbox.Describe(sandbox.NetHost)
	}
	if noNetNS {
		return sandbox.Describe(sandbox.NetSeccomp).Fallback("network namespaces are turned off for this tandem (TANDEM_NETNS=off)")
	}
	self, err := os.Executable()
	if err == nil {
		err = sandbox.ProbeNamespace(ctx, self)
	}
	if err != nil {
		return sandbox.Describe(sandbox.NetSeccomp).Fallback(err.Error())
	}
	return sandbox.Describe(sandbox.NetNamespace)
}

// sandboxReport is what `tandem sandbox` prints: the verdict first, then
// what is and is not enforced, and whether programs are judged as they
// start (execErr nil) or not.
func sandboxReport(e sandbox.Enforcement, refused, execErr error) string {
	var b strings.Builder
	if refused != nil {
		fmt.Fprintf(&b, "sandboxed local sessions are refused on this kernel: %v\n", refused)
		b.WriteString("fix: boot a kernel with Landlock enabled (lsm=...,landlock), or set sandbox: none on the target knowingly\n")
	} else {
		fmt.Fprintf(&b, "Landlock ABI %d: sandboxed local sessions can run\n", e.LandlockABI)
	}
	fmt.Fprintf(&b, "  network:      %s\n", e.Network)
	if e.NetworkNote != "" {
		fmt.Fprintf(&b, "                %s\n", e.NetworkNote)
	}
	fmt.Fprintf(&b, "  filesystem:   %s\n  tcp:          %s\n  udp:          %s\n  unix sockets: %s\n  signals:      %s\n",
		e.Filesystem, e.TCP, e.UDP, e.UnixSockets, e.Signals)
	if execErr == nil {
		b.WriteString("  exec judging: available (seccomp user notification): every program a command starts is judged by the command rules, and every connect is checked (unix sockets)\n")
	} else {
		fmt.Fprintf(&b, "  exec judging: not available: %v; sandboxed local targets are refused (their unix sockets are checked with it)\n", execErr)
	}
	for _, n := range e.NotEnforced {
		fmt.Fprintf(&b, "  not enforced: %s\n", n)
	}
	return b.String()
}
