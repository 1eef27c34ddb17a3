package shell

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/term"
)

// TestPromptBeforeAgentEnd: the terminal may draw the prompt after an
// agent command before the relay delivers the command's end (a loaded
// machine reorders the two streams). Once the command is final the prompt
// is idle: a line the human submits then is theirs, not type-ahead, and
// the prompt after it is idle too. (It was taken for type-ahead, which
// left the session "not at an idle prompt" for good.)
func TestPromptBeforeAgentEnd(t *testing.T) {
	for _, relayFirst := range []bool{true, false} {
		dir := &spool.Dir{Path: t.TempDir(), Inline: spool.DefaultInline}
		s := &Shell{log: slog.New(slog.DiscardHandler), relay: &Relay{}, ready: true}
		s.changed = sync.NewCond(&s.mu)
		a := &agentRun{phase: phaseAccepted, rec: Record{ID: "c1", Stdout: dir.New("c1.out"), Stderr: dir.New("c1.err")}}
		s.mu.Lock()
		s.agent, s.promptDue = a, true
		end := func() {
			a.streams[0], a.streams[1] = streamClosed, streamClosed
			s.finishAgent(a)
		}
		if relayFirst {
			end()
		}
		s.event(&term.Event{Kind: term.PromptStart})
		s.event(&term.Event{Kind: term.InputStart})
		if !relayFirst {
			if s.idlePrompt() {
				t.Fatal("idle before the agent's command was final")
			}
			end()
		}
		if !s.idlePrompt() || s.promptDue || s.agent != nil {
			t.Fatalf("relay first %v: after the prompt and the end, idle=%v promptDue=%v; want an idle prompt", relayFirst, s.idlePrompt(), s.promptDue)
		}
		s.mu.Unlock()
	}
}
