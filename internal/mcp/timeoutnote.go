package mcp

import (
	"fmt"
	"maps"
	"time"

	"github.com/tandem-sh/tandem/internal/session"
)

// clientPatience is how long common MCP clients (the TypeScript and Python
// SDKs, Claude Code) wait for a call before they give up and cancel it;
// a cancelled ssh_exec interrupts its command.
const clientPatience = 60 * time.Second

// timeoutNoteAbove is the longest timeoutSeconds taken without a note: it
// leaves the reply a few seconds to reach a client that gives up at 60 s.
const timeoutNoteAbove = 55 * time.Second

// noteTimeout returns a function that adds the timeoutNote field to an
// ssh_exec's reply, or to its failure, when the call's timeout is longer
// than common clients wait: the timeout is accepted, and the agent learns
// why its call may be cut off, and what to do instead.
func (s *Server) noteTimeout(c session.Caller, timeout time.Duration) func(reply, error) (reply, error) {
	return func(r reply, err error) (reply, error) {
		if timeout <= timeoutNoteAbove {
			return r, err
		}
		note := fmt.Sprintf("timeoutSeconds is %g: common MCP clients give up on a call after %g s and cancel it, which interrupts the command. Use at most %g and follow a longer command with ssh_read_output and its commandId (waitSeconds waits for it), unless your client waits longer.",
			timeout.Seconds(), clientPatience.Seconds(), timeoutNoteAbove.Seconds())
		if err == nil {
			r["timeoutNote"] = note
			return r, nil
		}
		f := *s.failure(c, err)
		f.fields = maps.Clone(f.fields)
		if f.fields == nil {
			f.fields = reply{}
		}
		f.fields["timeoutNote"] = note
		return nil, &f
	}
}
