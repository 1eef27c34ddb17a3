// Package transfer moves whole files in and out of one session's
// workspace: the agent's ssh_upload and ssh_download, and the human's
// uploads and downloads on the monitoring page. It owns path resolution
// (what "inside the workspace" means, symlinks included), atomic writes,
// size limits and the typed errors that say which rule refused. It does
// not know MCP, policy, audit or the web: callers judge and record; it
// moves bytes.
//
// Both kinds of session speak SFTP (github.com/pkg/sftp) to a server on
// the session's side, so one code path serves both:
//
//	Files ──SFTP──▶ ssh: the "sftp" subsystem on the session's own SSH connection
//	      ──SFTP──▶ local: "tandem __sandbox --serve-files", a process under the
//	                session's Landlock rules (workspace and run dir only), so the
//	                kernel, not this package, decides what it may touch
//
// Start with Open, which wraps one SFTP stream (shell.Conn's file channel),
// and the Files interface.
//
// What the path check does not stop: over SSH the SFTP server runs with the
// login's own rights, so a program in the session that swaps a directory
// for a symlink between the check and the copy can move a transfer out of
// the workspace to wherever that user may write (the same user could do so
// with the shell anyway). Locally the sandbox refuses such a path whatever
// the check saw.
package transfer
