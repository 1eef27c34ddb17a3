package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/session"
)

// Bounds of ssh_send_input's wait for what the command does next.
const (
	sendInputWait    = 2 * time.Second  // the default
	sendInputWaitMax = 50 * time.Second // under the clients' request timeout
	// sendInputQuiet is how long output must pause before the reply:
	// the command has answered, and likely waits again.
	sendInputQuiet = 300 * time.Millisecond
	// inputMax bounds one input.
	inputMax = 64 << 10
)

type sendInputArgs struct {
	SessionName  string   `json:"sessionName"`
	SessionToken string   `json:"sessionToken"`
	CommandID    string   `json:"commandId"`
	Input        string   `json:"input"`
	Submit       bool     `json:"submit"`
	WaitSeconds  *float64 `json:"waitSeconds"`
}

func (a sendInputArgs) callTimeout() time.Duration { return waitArg(a.WaitSeconds, sendInputWait) }

// waitArg is a waitSeconds argument as a duration, def when absent.
func waitArg(w *float64, def time.Duration) time.Duration {
	if w == nil {
		return def
	}
	return time.Duration(*w * float64(time.Second))
}

// sendInput types the agent's keys into its own running command (an
// answer at a prompt, a line for a REPL), then waits for what the command
// does next: output that pauses, the command's end, or waitSeconds.
func (s *Server) sendInput(ctx context.Context, c session.Caller, a sendInputArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, sessionArgs{a.SessionName, a.SessionToken})
	if err != nil {
		return nil, err
	}
	if err := require("commandId", a.CommandID); err != nil {
		return nil, err
	}
	if a.Input == "" && !a.Submit {
		return nil, invalidArg("input", "is empty: pass the keys to send, or submit true for Enter alone")
	}
	if len(a.Input) > inputMax {
		return nil, invalidArg("input", "is %d bytes, over the limit of %d: input is for answering prompts; write data to a file with ssh_exec", len(a.Input), inputMax)
	}
	if a.WaitSeconds != nil && (*a.WaitSeconds < 0 || *a.WaitSeconds > sendInputWaitMax.Seconds()) {
		return nil, invalidArg("waitSeconds", "must be between 0 and %g", sendInputWaitMax.Seconds())
	}
	rec, done, found := sess.Command(a.CommandID)
	switch {
	case !found:
		return nil, unknownCommand(sess, a.CommandID)
	case done || rec.Source != "agent":
		return nil, fail(codeNotRunning, fmt.Sprintf("Command %s is not your running command: input goes only to a command of yours that still runs (the human's commands and the shell's prompt are the human's).", a.CommandID), reply{"commandId": a.CommandID})
	}
	if err := sess.AgentMayAct(); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, c, "ssh_send_input", sess.Target.Name, sessionAction(c, sess, "ssh_send_input", "")); err != nil {
		return nil, err
	}
	keys := a.Input
	if a.Submit {
		keys += "\r"
	}
	from := [2]int64{rec.Stdout.Size(), rec.Stderr.Size()}
	echo, err := sess.SendInput(ctx, a.CommandID, []byte(keys))
	info := callFrom(ctx)
	// The audit keeps what the agent typed, redacted like output; only
	// at a prompt that hides keys (a password), or where tandem cannot
	// see whether the terminal echoes, the input's size alone.
	info.maskInput = echo != 1
	typed := sess.RedactText(a.Input)
	info.auditInput = &typed
	if err != nil {
		return nil, err
	}
	s.awaitAnswer(ctx, sess, a.CommandID, from, waitArg(a.WaitSeconds, sendInputWait))

	rec, done, _ = sess.Command(a.CommandID)
	r := reply{"commandId": rec.ID, "running": !done, "bytesSent": len(keys)}
	switch echo {
	case 0:
		r["echoed"] = false
	case 1:
		r["echoed"] = true
	}
	if done {
		r["result"] = s.result(c, rec)
		return ok(r), nil
	}
	// The output since the keys, within the budget: the rest is one
	// ssh_read_output away from nextOffset.
	budget := s.deps.InlineOutputBytes / 2
	if budget <= 0 {
		budget = readMaxBytes
	}
	for i, st := range []struct {
		name string
		f    capture
	}{{"stdout", rec.Stdout}, {"stderr", rec.Stderr}} {
		since := fromOffset{st.f, from[i]}
		pc := firstPiece(since, since.Size(), budget)
		pc.put(r, st.name)
		r[st.name+"Offset"] = from[i]
		if end := from[i] + int64(pc.raw); end < st.f.Size() {
			r[st.name+"NextOffset"] = end
		}
	}
	if state, running := sess.State(a.CommandID); running {
		stateFields(r, state)
	}
	return ok(r), nil
}

// awaitAnswer waits up to d for the command to answer input: it ends, or
// prints something and then pauses.
func (s *Server) awaitAnswer(ctx context.Context, sess *session.Session, id string, from [2]int64, d time.Duration) {
	deadline := time.Now().Add(d)
	seen := from
	for time.Now().Before(deadline) {
		grew := func(rec session.Record, done bool) bool {
			return done || rec.Stdout.Size() != seen[0] || rec.Stderr.Size() != seen[1]
		}
		wait := time.Until(deadline)
		if seen != from {
			wait = min(wait, sendInputQuiet) // printed: wait for a pause
		}
		if !sess.WaitCommand(ctx, id, wait, grew) {
			return // quiet, or out of time
		}
		rec, done, ok := sess.Command(id)
		if !ok || done {
			return
		}
		seen = [2]int64{rec.Stdout.Size(), rec.Stderr.Size()}
	}
}

// withInput replaces the input argument of audited arguments by in, the
// keys as redacted for the session; the patterns every audit record goes
// through apply again.
func withInput(args json.RawMessage, in string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	if _, ok := m["input"]; !ok {
		return args
	}
	m["input"], _ = json.Marshal(in)
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	return audit.Redact(b)
}

// fromOffset is the part of a stream from off on.
type fromOffset struct {
	capture
	off int64
}

func (f fromOffset) Size() int64 { return max(f.capture.Size()-f.off, 0) }

func (f fromOffset) ReadAt(p []byte, off int64) (int, error) { return f.capture.ReadAt(p, off+f.off) }

// unknownCommand is the reply for a commandId the session does not have.
func unknownCommand(sess *session.Session, id string) *failure {
	return commandGone(sess, id)
}
