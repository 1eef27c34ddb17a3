package shell

import (
	"bytes"
	"time"
)

// A human may type into the agent's running command from a viewer: answer
// its prompt, drive its REPL, press Ctrl-C. The agent did not see it
// happen, and its call may have returned long before. Each piece of viewer
// input that reaches the terminal while the agent's command runs is told
// to Options.OnTouch as a Touch, so the layers above can tell the agent on
// its next reply. A Touch counts the keys and never holds them: whether a
// terminal hides what is typed is not always known (a prompt in raw mode
// that does not echo looks like an editor), and a human's password must
// not reach the agent. Masked says where the terminal was seen to hide
// them.

// Touch is one piece of a viewer's input that reached the agent's running
// command: keys typed into it, an interrupt key, or both.
type Touch struct {
	// CommandID and Command name the agent's command.
	CommandID string
	Command   string
	// Viewer names who typed (see WithViewer).
	Viewer string
	// Keys is how many bytes the viewer sent (a key such as an arrow
	// sends several), bracketed-paste markers not counted.
	Keys int
	// Enters counts the line ends among them, outside pastes.
	Enters int
	// Masked: the terminal did not echo the keys (a password prompt), or
	// tandem could not tell.
	Masked bool
	// Interrupt is the last interrupt key in the input, if any: "Ctrl-C",
	// "Ctrl-Z" or "Ctrl-\\".
	Interrupt string
	// At is when the input reached tandem.
	At time.Time
}

// touched tells Options.OnTouch that viewer input p reaches the agent's
// command a; s.mu is held. Input after the command's end (its drain has
// begun) goes to the shell's prompt, not to the command, and is not a
// touch.
func (s *Shell) touched(a *agentRun, viewer string, p []byte, enters int, echoed bool, intr string, at time.Time) {
	if s.opts.OnTouch == nil || a == nil || a.inputClosed || a.phase != phaseAccepted || len(p) == 0 {
		return
	}
	n := len(p) - bytes.Count(p, pasteStart)*len(pasteStart) - bytes.Count(p, pasteEnd)*len(pasteEnd)
	s.opts.OnTouch(Touch{CommandID: a.rec.ID, Command: a.rec.Command, Viewer: viewer, Keys: max(n, 0), Enters: enters,
		Masked: !echoed, Interrupt: intr, At: at})
}

// lastInterrupt names the last interrupt key in p, or "".
func lastInterrupt(p []byte) string {
	i := bytes.LastIndexAny(p, interruptKeys)
	if i < 0 {
		return ""
	}
	return keyName(p[i])
}
