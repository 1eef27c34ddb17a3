package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/target"
)

// The stable error codes. Agents branch on these; never rename one.
const (
	codeInvalidArguments   = "invalid_arguments"
	codeInvalidToken       = "invalid_session_token"
	codeSessionEnded       = "session_ended"
	codeUserActivity       = "user_activity_detected"
	codeBusy               = "session_busy"
	codeTimeout            = "command_timeout"
	codeConnectionLost     = "connection_lost"
	codeShellExited        = "shell_exited"
	codeCaptureFailed      = "capture_failed"
	codeNotRunning         = "no_command_running"
	codeUnknownCommand     = "unknown_command"
	codeSessionExists      = "session_exists"
	codeInvalidName        = "invalid_session_name"
	codeUnknownTarget      = "unknown_target"
	codeAdHocRefused       = "adhoc_not_allowed"
	codeAuthFailed         = "auth_failed"
	codeHostKey            = "host_key_rejected"
	codeConnectFailed      = "connect_failed"
	codeSandboxUnavailable = "sandbox_unavailable"
	codeAuditUnavailable   = "audit_unavailable"
	codeCancelled          = "cancelled"
	codeInternal           = "internal_error"
	codeToolNotAllowed     = "tool_not_allowed"
	codeUnauthenticated    = "unauthenticated"
	codeShuttingDown       = "server_shutting_down"
	codeStoreUnavailable   = "store_unavailable"
	codeNodeUnavailable    = "node_unavailable"
)

// tokenHint shows the call format every session tool needs (seed AC5.4).
const tokenHint = `Every call that names a session needs the sessionToken that ssh_connect returned, for example ` +
	`ssh_exec {"sessionName":"my-session","sessionToken":"<token from ssh_connect>","command":"ls -la"}. ` +
	`Tokens are never shown again: if you lost it, call ssh_connect with a new name.`

const reconnectExample = `ssh_connect {"name":"my-session","target":"local"}`

// classify maps an error from the layers below to its stable reply. It is
// the only place that knows both the sentinels and the codes. The caller
// owns any output resources the reply refers to.
func (s *Server) classify(c session.Caller, err error) *failure {
	var (
		gate    *session.GateError
		busy    *session.BusyError
		timeout *session.TimeoutError
		ended   *session.EndedError
		hostKey *session.HostKeyError
		tokErr  *session.TokenError
		exit    *session.ExitError
		partial *partialError
	)
	var extra reply
	if errors.As(err, &partial) {
		extra = reply{"commandId": partial.rec.ID, "partial": s.result(c, partial.rec)}
	}
	switch {
	case errors.As(err, &gate):
		return s.gateFailure(c, gate)
	case errors.As(err, &busy):
		f := reply{"reason": busy.Reason}
		if busy.Command != "" {
			f["runningCommand"] = busy.Command
		}
		if !busy.Since.IsZero() {
			f["runningSince"] = busy.Since.UTC().Format(time.RFC3339Nano)
		}
		if busy.Line != "" {
			f["partialLine"] = busy.Line
		}
		return fail(codeBusy, fmt.Sprintf("The session is busy: %s. Wait for it to finish, or call ssh_cancel if it is your command.", busy.Reason), f)
	case errors.As(err, &timeout):
		f := reply{"running": true, "commandId": timeout.Partial.ID, "partial": s.result(c, timeout.Partial)}
		if timeout.LastLine != "" {
			f["lastLine"] = timeout.LastLine
		}
		if timeout.InputKnown {
			f["waitingForInput"] = timeout.WaitingForInput
		}
		if timeout.WaitingForInput {
			return fail(codeTimeout, fmt.Sprintf("The command is waiting for input on its terminal (it last printed %q), which you cannot type. Call ssh_cancel, then run it non-interactively (a flag such as --yes, a pipe such as `yes |`, or `< /dev/null`), or ask the human to answer it in the browser terminal.", timeout.LastLine), f)
		}
		return fail(codeTimeout, "The command is still running after the timeout; it keeps running. Follow it with ssh_read_output and its commandId (running turns false when it ends), or call ssh_cancel to interrupt it; until it ends the session answers session_busy.", f)
	case errors.As(err, &ended):
		why := fmt.Sprintf("Session '%s' has ended (%s).", ended.Name, ended.Reason)
		switch ended.Reason {
		case "server_restart":
			why = fmt.Sprintf("Session '%s' ended because the tandem server restarted, and sessions do not survive a restart.", ended.Name)
		case "node_lost":
			why = fmt.Sprintf("Session '%s' ended because the tandem node that held its shell stopped answering, and its shell went with it.", ended.Name)
		}
		return fail(codeSessionEnded, why+" Call ssh_connect again to start a new session, for example "+reconnectExample+".",
			reply{"reason": ended.Reason, "endedAt": ended.At.UTC().Format(time.RFC3339Nano)})
	case errors.As(err, &tokErr):
		return invalidToken(tokErr.Name)
	case errors.Is(err, store.ErrSharedUnavailable):
		return storeUnavailable(err)
	case errors.Is(err, session.ErrDraining):
		return fail(codeShuttingDown, "This tandem is shutting down: it lets running commands finish but starts no new sessions. Retry shortly (another node, or this one after its restart).", nil)
	case errors.Is(err, session.ErrNameTaken):
		return fail(codeSessionExists, "A session with this name already exists. Pick another name, or call ssh_disconnect on the old one first.", nil)
	case errors.Is(err, session.ErrInvalidName):
		return fail(codeInvalidName, "Session names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.", reply{"field": "name"})
	case errors.Is(err, target.ErrUnknown):
		return fail(codeUnknownTarget, err.Error()+".", nil)
	case errors.Is(err, target.ErrAdHocRefused):
		return fail(codeAdHocRefused, "This server only connects to configured targets. Pass \"target\" with one of the names it lists instead of host parameters.", nil)
	case errors.Is(err, target.ErrCredentials):
		return fail(codeAuthFailed, err.Error()+".", nil)
	case errors.Is(err, target.ErrSandboxUnavailable):
		return fail(codeSandboxUnavailable, err.Error()+".", nil)
	case errors.Is(err, session.ErrConnect):
		return fail(codeConnectFailed, "Could not connect: "+err.Error()+". Check the host name and port, and that an SSH server listens there.", nil)
	case errors.Is(err, session.ErrAuth) || errors.Is(err, session.ErrKey):
		return fail(codeAuthFailed, "SSH authentication failed: "+err.Error()+". Check the username and credentials.", nil)
	case errors.As(err, &hostKey) || errors.Is(err, session.ErrHostKey):
		return fail(codeHostKey, "The SSH host key was rejected: "+err.Error()+".", nil)
	case errors.Is(err, session.ErrInvalidCommand):
		return fail(codeInvalidArguments, "Invalid argument 'command': "+err.Error()+".", reply{"field": "command"})
	case errors.As(err, &exit):
		f := reply{"exitCode": exit.Status}
		if exit.Signal != "" {
			f = reply{"exitCode": nil, "signal": exit.Signal}
		}
		maps.Copy(f, extra)
		return fail(codeShellExited, "The session ended because its shell exited ("+exit.Error()+"): a command ran `exit`, or `set -e` ended the shell after a failure. Call ssh_connect again to start a new session, for example "+reconnectExample+".", f)
	case errors.Is(err, session.ErrCaptureFailed):
		return fail(codeCaptureFailed, "The command's output could not be captured: "+err.Error()+". What was captured is in partial; the session stays usable.", extra)
	case errors.Is(err, session.ErrConnectionLost):
		return fail(codeConnectionLost, "The connection to the session's shell was lost: "+err.Error()+". Call ssh_connect again to start a new session.", nil)
	case errors.Is(err, context.Canceled):
		return fail(codeCancelled, "The call was cancelled by the client; its command was interrupted.", extra)
	case errors.Is(err, session.ErrNotRunning):
		return fail(codeNotRunning, "No command of yours is running in this session, so there is nothing to cancel.", nil)
	case errors.Is(err, session.ErrConnectTimeout) || errors.Is(err, context.DeadlineExceeded):
		return fail(codeConnectFailed, "Timed out: "+err.Error()+".", nil)
	}
	return fail(codeInternal, "tandem failed: "+err.Error()+".", nil)
}

// partialError carries what an Exec captured before it failed, for
// failures whose reply shows it (a shell that exited, a failed capture).
type partialError struct {
	err error
	rec session.Record
}

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

func invalidToken(name string) *failure {
	return fail(codeInvalidToken, fmt.Sprintf("Invalid or missing session token for session '%s'", name), reply{"hint": tokenHint})
}

func (s *Server) gateFailure(c session.Caller, g *session.GateError) *failure {
	cmds := make([]any, 0, len(g.Commands))
	p := s.plan(c)
	for _, rec := range g.Commands {
		cmds = append(cmds, userCommand(p, rec))
	}
	p.fill()
	return fail(codeUserActivity, "User commands executed since last MCP command. Review activity and retry.", reply{
		"userActivitySince": g.Since.UTC().Format(time.RFC3339Nano),
		"userCommands":      cmds,
	})
}

// userCommand renders one human command for the gate. Its output joins
// the plan: every command is listed whatever its size, and the outputs of
// all of them share the reply's one budget.
func userCommand(p *plan, rec session.Record) reply {
	r := reply{
		"commandId": rec.ID,
		"command":   rec.Command,
		"exitCode":  exitCode(rec),
		"duration":  rec.Duration.Milliseconds(),
		"timestamp": rec.Started.UTC().Format(time.RFC3339Nano),
		"cwd":       rec.Cwd,
	}
	p.add(r, rec.ID, "stdout", rec.Stdout)
	p.add(r, rec.ID, "stderr", rec.Stderr)
	if rec.Merged {
		r["streams"] = "merged"
	}
	return r
}

// exitCode is the status, or nil when the shell could not report one.
func exitCode(c session.Record) any {
	if !c.ExitKnown {
		return nil
	}
	return c.ExitCode
}

// storeUnavailable is the reply while the shared store cannot be reached:
// nothing ran, since nothing could be recorded, and service resumes by
// itself when the store is back.
func storeUnavailable(err error) *failure {
	return fail(codeStoreUnavailable, "The shared store (PostgreSQL) cannot be reached right now ("+err.Error()+"), so tandem ran nothing: what cannot be recorded does not happen. Retry in a few seconds; service resumes by itself when the store is back.", nil)
}

// UnreachableReply is the JSON-RPC response (for request id) to a tool
// call that another node had to serve, whose session's node did not
// answer. A cluster router sends it in place of the owner's reply.
// delivered says the call reached that node before it stopped answering:
// then it may have run, and the reply says so (mayHaveRun) rather than
// invite the agent to repeat something that must not run twice.
func UnreachableReply(id json.RawMessage, tool, sessionName string, err error, delivered bool) []byte {
	f := fail(codeNodeUnavailable, fmt.Sprintf("The tandem node that holds session '%s' does not answer (%v), so %s did not run there. If that node is gone, the session ends within seconds with reason node_lost: then call ssh_connect again, for example %s.", sessionName, err, tool, reconnectExample), nil)
	if delivered {
		f = fail(codeNodeUnavailable, fmt.Sprintf("The tandem node that holds session '%s' stopped answering while it handled this %s call (%v): it may have run there before the node failed, and its result went with it. Do not take it as not run: check before you repeat anything that must not happen twice. If that node is gone, the session ends within seconds with reason node_lost: then call ssh_connect again, for example %s.", sessionName, tool, err, reconnectExample), reply{"mayHaveRun": true})
	}
	res := result(f.reply())
	b, merr := json.Marshal(struct {
		JSONRPC string              `json:"jsonrpc"`
		ID      json.RawMessage     `json:"id"`
		Result  *mcp.CallToolResult `json:"result"`
	}{"2.0", id, res})
	if merr != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"node_unavailable"}}`)
	}
	return b
}
