package main

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// attached is one `tandem attach` process with its input and output.
type attached struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	mu  sync.Mutex
	out bytes.Buffer
}

func (a *attached) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.Write(p)
}

func (a *attached) screen() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

func startAttach(t *testing.T, args ...string) *attached {
	t.Helper()
	a := &attached{}
	a.cmd = exec.Command(binary, append([]string{"attach"}, args...)...)
	a.cmd.Stdout, a.cmd.Stderr = a, a
	in, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.in = in
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Kill(); _ = a.cmd.Wait() })
	return a
}

// waitScreenText waits until the attached terminal shows text.
func (a *attached) waitScreenText(t *testing.T, text string) {
	t.Helper()
	if !waitFor(15*time.Second, func() bool { return strings.Contains(a.screen(), text) }) {
		t.Fatalf("tandem attach never showed %q; it shows:\n%s", text, a.screen())
	}
}

// TestAttach: keys typed through `tandem attach` are the human's, so the
// agent's next call is told; --observe shows the session and types
// nothing; an operator attaches by session id.
func TestAttach(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "att"}))["sessionToken"])
	s := sess{srv, "att", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "att", "sessionToken": tok}))["monitoringUrl"])

	// Observe: what the agent runs shows up; what is typed goes nowhere.
	obs := startAttach(t, "--observe", url)
	obs.waitScreenText(t, "@") // the prompt, user@host: joined
	if _, err := io.WriteString(obs.in, "echo typed-by-observer\r"); err != nil {
		t.Fatal(err)
	}
	if r := result(t, s.exec(t, "echo seen-by-observer")); r["stdout"] != "seen-by-observer\n" {
		t.Fatalf("agent call beside an observer: %v", r)
	}
	obs.waitScreenText(t, "seen-by-observer")
	if strings.Contains(obs.screen(), "typed-by-observer") {
		t.Error("--observe typed into the session")
	}

	// Attach and type: the agent's next call sees the human's command.
	att := startAttach(t, url)
	att.waitScreenText(t, "seen-by-observer") // the scrollback
	if _, err := io.WriteString(att.in, "echo from-attach\r"); err != nil {
		t.Fatal(err)
	}
	att.waitScreenText(t, "from-attach\r\n")
	var gate map[string]any
	if !waitFor(15*time.Second, func() bool {
		r := s.exec(t, "pwd")
		if r["error"] == "session_busy" {
			return false // the human's command is still ending
		}
		gate = r
		return true
	}) {
		t.Fatal("the session stayed busy after the human's command")
	}
	g := wantError(t, gate, "user_activity_detected")
	cmds, _ := g["userCommands"].([]any)
	if len(cmds) != 1 || !strings.Contains(str(cmds[0].(map[string]any)["command"]), "echo from-attach") {
		t.Fatalf("userCommands: %v", g["userCommands"])
	}
	_ = att.in.Close() // end of input: detach
	if err := att.cmd.Wait(); err != nil {
		t.Errorf("attach after its input ended: %v\n%s", err, att.screen())
	}

	// The operator, by session id through the data dir's token.
	rows := newOperatorClient(t, srv).do(t, "GET", "/api/state", "")["sessions"].([]any)
	id := str(rows[0].(map[string]any)["id"])
	byID := startAttach(t, "--observe", "--data-dir", srv.dataDir, id)
	byID.waitScreenText(t, "from-attach")
}
