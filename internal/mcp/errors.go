package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
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
	codeIntegrationLost    = "shell_integration_lost"
	codeUnresponsive       = "shell_unresponsive"
	codeOutputUnavailable  = "output_unavailable"
	codeNotRunning         = "no_command_running"
	codeUnknownCommand     = "unknown_command"
	codeOutputRemoved      = "output_removed"
	codeSessionExists      = "session_exists"
	codeInvalidName        = "invalid_session_name"
	codeUnknownTarget      = "unknown_target"
	codeAdHocRefused       = "adhoc_not_allowed"
	codeAuthFailed         = "auth_failed"
	codeRedaction          = "redaction_unavailable"
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
	codeHumanPending       = "human_pending"
	// The file tools' (transfer.go).
	codeFileNotFound     = "file_not_found"
	codeFileExists       = "file_exists"
	codeFileTooLarge     = "file_too_large"
	codePathOutside      = "path_outside_workspace"
	codeNotAFile         = "not_a_file"
	codeFileDenied       = "file_access_denied"
	codeFilesUnavailable = "transfer_unavailable"
)

// tokenHint shows the call format every session tool needs (seed AC5.4).
const tokenHint = `Every call that names a session needs the sessionToken that ssh_connect returned, for example ` +
	`ssh_exec {"sessionName":"my-session","sessionToken":"<token from ssh_connect>","command":"ls -la"}. ` +
	`Tokens are never shown again: if you lost it, call ssh_connect with a new name.`

// reconnectExample is the reconnect call of a reply that knows no caller
// (see Server.reconnect for one that does).
const reconnectExample = `ssh_connect {"name":"my-session","target":"<the target you used>"}`

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
		human   *session.HumanRequestedError
	)
	var extra reply
	if errors.As(err, &partial) {
		extra = reply{"commandId": partial.rec.ID, "partial": s.result(c, partial.rec)}
	}
	switch {
	case errors.As(err, &gate):
		return s.gateFailure(c, gate)
	case errors.As(err, &busy):
		return busyFailure(busy)
	case errors.As(err, &human):
		return humanRequestedFailure(human)
	case errors.As(err, &timeout) && timeout.Held != "":
		return s.heldFailure(c, timeout)
	case errors.As(err, &timeout):
		f := reply{"running": true, "commandId": timeout.Partial.ID, "partial": s.result(c, timeout.Partial)}
		stateFields(f, timeout.State)
		switch st := timeout.State; {
		case st.WaitingForInput:
			return fail(codeTimeout, fmt.Sprintf("The command is waiting for input on its terminal (it last printed %q). Answer it with ssh_send_input and this commandId (submit adds Enter), or call ssh_cancel and run it non-interactively (a flag such as --yes, a pipe such as `yes |`, or `< /dev/null`), or ask the human to answer it in the browser terminal.", st.LastLine), f)
		case st.FullScreen:
			return fail(codeTimeout, fmt.Sprintf("A full-screen program%s holds the terminal; it keeps running. Drive it with ssh_send_input and this commandId, or end it with ssh_cancel (which ends full-screen programs too), or ask the human to use it in the browser terminal.", programName(st.Program)), f)
		}
		return fail(codeTimeout, "The command is still running after the timeout; it keeps running. Follow it with ssh_read_output and its commandId (waitSeconds waits for new output; running turns false when it ends), or call ssh_cancel to interrupt it; until it ends the session answers session_busy.", f)
	case errors.As(err, &ended):
		why := fmt.Sprintf("Session '%s' has ended (%s).", ended.Name, ended.Reason)
		switch ended.Reason {
		case "server_restart":
			why = fmt.Sprintf("Session '%s' ended because the tandem server restarted, and sessions do not survive a restart.", ended.Name)
		case "node_lost":
			why = fmt.Sprintf("Session '%s' ended because the tandem node that held its shell stopped answering, and its shell went with it.", ended.Name)
		case session.EndHumanExit:
			why = fmt.Sprintf("Session '%s' ended because the human ended its shell (exit or Ctrl-D in the terminal).", ended.Name)
		}
		f := reply{"reason": ended.Reason, "endedAt": ended.At.UTC().Format(time.RFC3339Nano)}
		if ended.Gate != nil {
			// What the human ran before the end, the end included: told once.
			maps.Copy(f, s.gateFields(c, ended.Gate))
			why += " userCommands lists what the human ran since your last call."
		}
		return fail(codeSessionEnded, why+" Call ssh_connect again to start a new session, for example "+s.reconnect(c)+".", f)
	case errors.As(err, &tokErr):
		return invalidToken(tokErr.Name)
	case errors.Is(err, store.ErrSharedUnavailable):
		return storeUnavailable(err)
	case errors.Is(err, session.ErrDraining):
		return fail(codeShuttingDown, "This tandem is shutting down: it lets running commands finish but starts no new sessions. Retry shortly (another node, or this one after its restart).", nil)
	case errors.Is(err, session.ErrNameTaken), errors.Is(err, store.ErrNameTaken):
		return fail(codeSessionExists, "A session with this name already exists. Pick another name, or call ssh_disconnect on the old one first.", nil)
	case errors.Is(err, session.ErrInvalidName):
		return fail(codeInvalidName, "Session names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.", reply{"field": "name"})
	case errors.Is(err, target.ErrUnknown):
		return fail(codeUnknownTarget, err.Error()+".", nil)
	case errors.Is(err, target.ErrAdHocRefused):
		return fail(codeAdHocRefused, "This server only connects to configured targets. Pass \"target\" with one of the names it lists instead of host parameters.", nil)
	case errors.Is(err, target.ErrCredentials):
		return fail(codeAuthFailed, err.Error()+".", nil)
	case errors.Is(err, target.ErrRedaction):
		return fail(codeRedaction, err.Error()+".", nil)
	case errors.Is(err, target.ErrSandboxUnavailable):
		return fail(codeSandboxUnavailable, err.Error()+".", nil)
	case errors.Is(err, session.ErrConnect):
		return fail(codeConnectFailed, "Could not connect: "+err.Error()+". Check the host name and port, and that an SSH server listens there.", nil)
	case errors.Is(err, session.ErrAuth) || errors.Is(err, session.ErrKey):
		return fail(codeAuthFailed, "SSH authentication failed: "+err.Error()+". Check the username and credentials.", nil)
	case errors.As(err, &hostKey) || errors.Is(err, session.ErrHostKey):
		return fail(codeHostKey, "The SSH host key was rejected: "+err.Error()+".", nil)
	case errors.Is(err, session.ErrInvalidInput):
		return fail(codeInvalidArguments, "Invalid argument 'input': "+err.Error()+".", reply{"field": "input"})
	case errors.Is(err, session.ErrInvalidCommand):
		return fail(codeInvalidArguments, "Invalid argument 'command': "+err.Error()+".", reply{"field": "command"})
	case errors.As(err, &exit):
		f := reply{"exitCode": exit.Status}
		if exit.Signal != "" {
			f = reply{"exitCode": nil, "signal": exit.Signal}
		}
		maps.Copy(f, extra)
		return fail(codeShellExited, "The session ended because its shell exited ("+exit.Error()+"): a command ran `exit`, or `set -e` ended the shell after a failure. Call ssh_connect again to start a new session, for example "+s.reconnect(c)+".", f)
	case errors.Is(err, session.ErrNestedShell):
		return fail(codeIntegrationLost, "tandem cannot run commands in the session now ("+err.Error()+"). Nothing needs reconnecting: call again once the human has left that shell.", extra)
	case errors.Is(err, session.ErrIntegrationLost):
		return fail(codeIntegrationLost, "The shell no longer runs tandem's integration ("+err.Error()+"), so tandem cannot run or capture commands in it. What was captured is in partial. Call ssh_disconnect, then ssh_connect again for a fresh shell, for example "+s.reconnect(c)+"; the human can still use this terminal until then.", extra)
	case errors.Is(err, session.ErrUnresponsive):
		return fail(codeUnresponsive, "The shell does not respond ("+err.Error()+"): it may be stopped (SIGSTOP) or wedged. tandem tried Ctrl-C, SIGTERM and SIGKILL on its command. Ask the human to look at the terminal, or call ssh_disconnect and ssh_connect again.", extra)
	case errors.Is(err, session.ErrCaptureFailed):
		return fail(codeCaptureFailed, "tandem could not hand the command to the shell ("+err.Error()+"), so nothing ran. Retry it; if this keeps happening, call ssh_disconnect and ssh_connect again.", extra)
	case errors.Is(err, session.ErrConnectionLost):
		return fail(codeConnectionLost, "The connection to the session's shell was lost: "+err.Error()+". Call ssh_connect again to start a new session.", nil)
	case errors.Is(err, context.Canceled):
		return fail(codeCancelled, "The call was cancelled by the client; its command was interrupted.", extra)
	case errors.Is(err, session.ErrClosed):
		return fail(codeSessionEnded, "The session was ended while this call ran (ssh_disconnect, a lease that ran out, or the server shutting down). Call ssh_connect again to start a new session, for example "+s.reconnect(c)+".", merge(reply{"reason": "ended_during_call"}, extra))
	case errors.Is(err, session.ErrStart):
		return fail(codeConnectFailed, "The shell did not start: "+err.Error()+". Check the target (its login shell must run bash, and its startup files must not wait for input), then call ssh_connect again.", nil)
	case errors.Is(err, errOutputRead):
		return fail(codeOutputUnavailable, "tandem could not read the command's output back from its spool file ("+err.Error()+"): check the disk of tandem's data directory. The command itself is not affected.", nil)
	case errors.Is(err, session.ErrNotRunning):
		return fail(codeNotRunning, "No command of yours is running in this session, so there is nothing to cancel.", nil)
	case errors.Is(err, session.ErrConnectTimeout) || errors.Is(err, context.DeadlineExceeded):
		return fail(codeConnectFailed, "Timed out: "+err.Error()+".", nil)
	}
	return fail(codeInternal, "tandem failed: "+err.Error()+".", nil)
}

// stateFields adds what a running command does with the terminal.
func stateFields(r reply, st session.InputState) {
	if st.LastLine != "" {
		r["lastLine"] = st.LastLine
	}
	if st.Known {
		r["waitingForInput"] = st.WaitingForInput
	}
	if st.FullScreen {
		r["fullScreen"] = true
		if st.Program != "" {
			r["program"] = st.Program
		}
	}
}

// programName is " (name)" for a message, or "" when unknown.
func programName(p string) string {
	if p == "" {
		return ""
	}
	return " (" + p + ")"
}

// busyFailure says what holds the shell and what the agent can do about it.
func busyFailure(busy *session.BusyError) *failure {
	f := reply{"reason": busy.Kind}
	if busy.Command != "" {
		clipRunning(f, busy.Command)
	}
	if busy.CommandID != "" {
		f["runningCommandId"] = busy.CommandID
	}
	if !busy.Since.IsZero() {
		f["runningSince"] = busy.Since.UTC().Format(time.RFC3339Nano)
		f["runningForMs"] = time.Since(busy.Since).Milliseconds()
	}
	if busy.Line != "" {
		f["partialLine"] = busy.Line
	}
	var msg string
	switch busy.Kind {
	case session.BusyAgent:
		msg = "The session is busy: your earlier command is still running (runningCommandId). Follow it with ssh_read_output, or call ssh_cancel to interrupt it."
	case session.BusyHuman:
		msg = fmt.Sprintf("The session is busy: the human is running a command (%s for %s). Wait for it to finish and call again; ssh_read_output with runningCommandId shows its output so far. It is not yours to cancel: ask the human if it must stop.",
			quoteCommand(busy.Command), time.Since(busy.Since).Round(time.Second))
	case session.BusyPartialLine:
		msg = "The session is busy: the human has typed part of a command line (partialLine) and not submitted it. Wait and call again, or ask the human to finish or clear the line; nothing of yours is running, so there is nothing to cancel."
	case session.BusyContinuation:
		msg = "The session is busy: the human is in the middle of a multi-line command. Wait and call again, or ask the human to finish it."
	case session.BusyHumanInput:
		msg = "The human typed into your running command (runningCommandId) and tandem cannot tell that the command has read all of it (it never can over SSH): your keys would mix with theirs in the terminal's input queue, whose unread rest is discarded when the command ends. Wait for the command to read it or to end, or ask the human."
	default:
		msg = "The session is busy: the shell is not at an idle prompt (it is on its way to one, or a program of the human's reads the terminal). Wait a moment and call again."
	}
	return fail(codeBusy, msg, f)
}

// quoteCommand quotes a command line for a message, cut to a readable size.
func quoteCommand(s string) string {
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return fmt.Sprintf("%q", s)
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
	return fail(codeUserActivity, "User commands executed since last MCP command. Review activity and retry.", s.gateFields(c, g))
}

// The gate's reply within the inline budget: the newest commands come
// whole (their outputs sharing half the budget), older ones compact
// (command, exit code, commandId), and those that fit neither way are
// counted, with the whole history one ssh_read_output away.
const (
	gateWhole        = 20      // the most commands shown whole
	gateCommandBytes = 4 << 10 // a whole entry's command text at most
	gateCompactBytes = 256     // a compact entry's command text at most
)

// gateFields renders the human's commands that a gate reply reports, in
// order, within the inline budget.
func (s *Server) gateFields(c session.Caller, g *session.GateError) reply {
	n := len(g.Commands)
	limit := s.deps.InlineOutputBytes
	f := reply{"userActivitySince": g.Since.UTC().Format(time.RFC3339Nano), "userCommandCount": n}
	if u := unattributed(g.Commands); u > 0 {
		f["unattributedCommands"] = u
		f["unattributedHint"] = fmt.Sprintf("%d of these commands ran although no viewer's keystroke explains them (input tandem could not follow, or a program printing shell-integration marks): they are marked unattributed; read their output with ssh_read_output and their commandId.", u)
	}
	if limit <= 0 {
		cmds := make([]any, 0, n)
		p := s.plan(c)
		for _, rec := range g.Commands {
			cmds = append(cmds, userCommand(p, rec, 0))
		}
		p.fill()
		f["userCommands"] = cmds
		return f
	}
	// Whole entries, newest first, while their metadata fits a quarter.
	whole, used := 0, 0
	for i := n - 1; i >= 0 && whole < gateWhole; i-- {
		cost := jsonSize(userCommand(nil, g.Commands[i], gateCommandBytes)) + 64 // its output fields' names
		if whole > 0 && used+cost > limit/4 {
			break
		}
		whole++
		used += cost
	}
	// Compact entries for older ones, while the rest of the budget lasts.
	left := limit - limit/2 - used
	compact := 0
	for i := n - whole - 1; i >= 0; i-- {
		cost := jsonSize(compactCommand(g.Commands[i])) + 1
		if cost > left {
			break
		}
		compact++
		left -= cost
	}
	omitted := n - whole - compact
	cmds := make([]any, 0, whole+compact)
	for _, rec := range g.Commands[omitted : n-whole] {
		cmds = append(cmds, compactCommand(rec))
	}
	p := s.plan(c)
	p.limit = limit / 2
	for _, rec := range g.Commands[n-whole:] {
		cmds = append(cmds, userCommand(p, rec, gateCommandBytes))
	}
	p.fill()
	f["userCommands"] = cmds
	if compact > 0 || omitted > 0 {
		f["userCommandsCompact"] = compact
	}
	if cut := truncated(cmds); cut > 0 {
		f["commandTruncatedHint"] = fmt.Sprintf("%d command lines were cut to fit this reply (commandTruncated): ssh_read_output with a command's commandId and stream \"command\" reads its line whole.", cut)
	}
	if omitted > 0 && g.Keep != nil {
		f["userCommandsOmitted"] = omitted
		f["historyId"] = g.Keep(historyList(g.Commands))
		f["historyHint"] = fmt.Sprintf("The %d oldest of these %d commands did not fit this reply: call ssh_read_output with commandId set to historyId for all of them, one JSON object a line (grep works too); each names its commandId, whose output ssh_read_output reads.", omitted, n)
	}
	return f
}

// unattributed counts the commands no viewer's Enter explains.
func unattributed(recs []session.Record) int {
	n := 0
	for _, r := range recs {
		if r.Unattributed {
			n++
		}
	}
	return n
}

// jsonSize is the length of v's JSON encoding.
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// clipCommand cuts a command line to at most max bytes, on a character.
func clipCommand(r reply, cmd string, max int) {
	if max > 0 && len(cmd) > max {
		r["command"] = strings.ToValidUTF8(cmd[:max], "")
		r["commandTruncated"] = true
		r["commandBytes"] = len(cmd)
		return
	}
	r["command"] = cmd
}

// compactCommand is a human command without its output: what it was, how
// it ended, and the id that reads its output back.
func compactCommand(rec session.Record) reply {
	r := reply{"commandId": rec.ID, "exitCode": exitCode(rec), "stdoutBytes": rec.Stdout.Size()}
	clipCommand(r, rec.Command, gateCompactBytes)
	return r
}

// historyList is the whole history of a gate reply, a JSON object a line.
func historyList(recs []session.Record) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, rec := range recs {
		line := map[string]any{
			"commandId": rec.ID, "command": rec.Command, "exitCode": exitCode(rec), "cwd": rec.Cwd,
			"timestamp": rec.Started.UTC().Format(time.RFC3339Nano), "duration": rec.Duration.Milliseconds(),
			"stdoutBytes": rec.Stdout.Size(), "viewer": rec.Viewer,
		}
		if rec.Unattributed {
			line["unattributed"] = true
		}
		_ = enc.Encode(line)
	}
	return b.Bytes()
}

// userCommand renders one human command for the gate. Its output joins
// the plan (nil: left out): every command is listed whatever its size,
// and the outputs of all of them share the plan's one budget. A command
// line over maxCommand bytes (0: no bound) is cut, and says so.
func userCommand(p *plan, rec session.Record, maxCommand int) reply {
	r := reply{
		"commandId": rec.ID,
		"exitCode":  exitCode(rec),
		"duration":  rec.Duration.Milliseconds(),
		"timestamp": rec.Started.UTC().Format(time.RFC3339Nano),
		"cwd":       rec.Cwd,
	}
	clipCommand(r, rec.Command, maxCommand)
	if rec.Viewer != "" {
		r["viewer"] = rec.Viewer
	}
	if rec.Unattributed {
		r["unattributed"] = true
	}
	if len(rec.Repaired) > 0 {
		r["shellRepaired"] = rec.Repaired
	}
	if p != nil {
		p.add(r, rec.ID, "stdout", rec.Stdout)
		p.add(r, rec.ID, "stderr", rec.Stderr)
	}
	if rec.Merged {
		r["streams"] = "merged"
	}
	addRedacted(r, rec)
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
