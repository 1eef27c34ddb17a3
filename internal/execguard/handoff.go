package execguard

import (
	"context"
	"fmt"
	"os"

	"github.com/tandem-sh/tandem/internal/fdpass"
)

// Pair returns the two ends of the socket that carries a listener from the
// launcher to tandem (fdpass.Pair).
func Pair() (parent, child *os.File, err error) {
	return fdpass.Pair("execguard")
}

// Send passes the listener over the socket sock (the launcher's end of a
// Pair) with SCM_RIGHTS. The caller closes both afterwards: once tandem
// holds the listener, the launcher needs neither. The send never waits for
// tandem: the launcher's own exec is then held in the kernel until tandem
// serves it, and fails with ENOSYS if tandem closes the socket unread.
func Send(sock, listener int) error {
	if err := fdpass.Send(sock, listener); err != nil {
		return fmt.Errorf("exec guard: send listener: %w", err)
	}
	return nil
}

// Receive reads the listener that the launcher sends on parent, waiting
// until ctx ends. A launcher that exits without sending (it refused to run
// the program) makes Receive fail with an error, not wait.
func Receive(ctx context.Context, parent *os.File) (*Listener, error) {
	fd, err := fdpass.Receive(ctx, parent)
	if err != nil {
		return nil, fmt.Errorf("exec guard: receive listener: %w", err)
	}
	return newListener(fd)
}
