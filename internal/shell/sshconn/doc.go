// Package sshconn is the SSH backend of package shell: it dials a host with
// golang.org/x/crypto/ssh, checks its key against a known_hosts file, and
// runs the session's shell in a remote PTY. It knows SSH, host keys and
// credentials; it does not know MCP, sessions or shell integration.
//
// One connection carries several channels:
//
//	Options.Dial ──TCP──▶ sshd
//	   ├─ session channel + PTY: the interactive shell (Conn.Read/Write)
//	   ├─ session channel, no PTY: the relay (Conn.OpenRelay), which streams
//	   │    the shell's FIFOs "out"/"err" back and writes "in"
//	   ├─ session channel, no PTY: the helper (helper.go), a bash without
//	   │    rc files started once, which answers every question about the
//	   │    server's processes (/proc, stty -a of the shell's terminal for
//	   │    the echo, kill) in one round trip, with no login per question
//	   ├─ short exec channels, only while the helper is down
//	   └─ keepalive@openssh.com global requests: detect a dead link
//
// SSH flow control is per channel: a channel whose output nobody reads
// stops the remote writer once its window is full. The caller must
// therefore read the PTY (Conn.Read) continuously, and read a relay's
// Stdout and Stderr concurrently (they share one channel's window).
//
// Errors wrap a few sentinels (ErrAuth, ErrHostKey, ErrTimeout, ErrKey,
// ErrNoForeground) and shell.ErrConnectionLost, so the mcp layer can map
// them to stable codes. No error message contains a password, passphrase
// or key.
package sshconn
