// Package shell runs one interactive bash that an agent and any number of
// human viewers share, and turns what happens in it into exact records.
//
// bash runs with integration.bash as its rc. It talks to tandem over two
// channels: the terminal (a PTY), which carries everything a person sees
// plus OSC 133/633 marks that end in a per-session nonce, and a relay of
// three FIFOs in the shell's run dir: "in" (tandem to shell), "out" and
// "err" (the agent command's stdout and stderr).
//
// An agent command (Exec) goes through these phases:
//
//	tandem                         terminal / relay                  bash
//	claim: shell idle, gate ok;
//	viewer input is held from here
//	stage key ESC[9001~ ─────────▶ pty ──────────────────────────▶ __tandem_stage
//	                      ◀─────── pty: 633;X;want ◀─────────────── asks for the line
//	"ID LEN\n" + LEN bytes ──────▶ in FIFO ──────────────────────▶ read -N LEN
//	                      ◀─────── pty: 633;X;staged;id=ID ◀────── line in readline,
//	                                                                fds 1,2 → out, err
//	                      ◀─────── out, err: 633;X;bom;id=ID ◀───── (capture begins)
//	accept key ESC[9002~ + held ─▶ pty ──────────────────────────▶ accept-line
//	input                 ◀─────── err: readline's redraw, 133;C ◀─ PS0 (C is last)
//	stdout, stderr        ◀─────── out, err: the command's output
//	                      ◀─────── out, err: 633;X;eom;status;ran;cwd ◀ PROMPT_COMMAND,
//	no more agent keys;                                             fds 1,2 back
//	"NONCE ID keep|drain\n" ─────▶ in FIFO ──────────────────────▶ read (before readline)
//	done when both streams ended   pty: 133;D, 633;P, 633;X;drain;id=ID, prompt
//	                               (on "drain": the rc empties the tty, 633;X;drained)
//
// Keys the agent sends to its running command (SendInput) that it leaves
// unread are discarded before bash reads its next line, and the human's
// keys never share the terminal's queue with them: see agentkeys.go. A
// viewer's keys that reach the agent's running command are told to
// Options.OnTouch, counted, never passed on: see touch.go.
//
// Because fds 1 and 2 move when the line is staged, every shape of line is
// captured, a leading subshell included, and the result (status, cwd) comes
// from the relay. A line bash cannot parse never prints C: its message is
// what follows readline's redraw on err. A line bash needs more of (an open
// quote) draws PS2 into err, and tandem abandons it with Ctrl-C.
//
// Human commands are seen on the terminal only: C starts one (if a viewer
// pressed Enter that could have started it), 633;E names it, D ends it and
// P gives the cwd. Marks are trusted only with the nonce, which the shell
// reads from the terminal at start and never exports. A program that stole
// it from the shell's memory can still print marks: without viewer input
// they make no human command, and on a local PTY an end mark counts only
// while the shell itself holds the foreground.
package shell
