package shell

import (
	_ "embed"
	"strings"
)

// integrationRC is the rc file bash runs instead of ~/.bashrc; it performs
// the nonce handshake, creates the relay FIFOs, loads the user's own rc and
// then installs the marks and the agent-command key bindings.
//
//go:embed integration.bash
var integrationRC string

// Key sequences bound by integration.bash. No terminal sends them.
const (
	keyStage   = "\x1b[9001~"
	keyAccept  = "\x1b[9002~"
	keyUnstage = "\x1b[9003~"
	keyHeal    = "\x1b[9005~"
)

const rcDelimiter = "__TANDEM_RC_EOF__"

// LaunchCommand is the POSIX sh command line that starts an integrated bash.
// The rc travels as a here-document on fd 3, so it needs no file on the
// target and no process substitution; it carries no secret (the nonce comes
// later, over the tty).
func LaunchCommand() string {
	var b strings.Builder
	b.WriteString("exec bash --rcfile /dev/fd/3 -i 3<<'" + rcDelimiter + "'\n")
	b.WriteString("exec 3<&-\n")
	b.WriteString(integrationRC)
	if !strings.HasSuffix(integrationRC, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(rcDelimiter + "\n")
	return b.String()
}
