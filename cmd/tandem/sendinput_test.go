package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSendInputNeverReachesThePrompt: through the real binary, locally and
// over a real sshd, keys the agent sends with ssh_send_input that its
// command leaves unread (sleep, read, cat and Ctrl-D), and a line behind
// a signal key (refused), never run at the shell's prompt: the gate
// reports no command of theirs and nothing they would do happens, while
// the line the human types ahead through the terminal's WebSocket during
// the same command is reported, as the human's (issue 28: Ctrl-C + a
// line ran at the prompt, filed as the human's, past deny rules).
func TestSendInputNeverReachesThePrompt(t *testing.T) {
	attacks := []struct {
		cmd, keys string
		refused   bool
	}{
		{"sleep 0.6", "\x03touch pwn; echo PWNED-$((6*7))\n", true},
		{"sleep 0.6", "\x1atouch pwn; echo PWNED-$((6*7))\n", true},
		{"sleep 0.6", "\x1ctouch pwn; echo PWNED-$((6*7))\n", true},
		{"sleep 0.6", "touch pwn; echo PWNED-$((6*7))\n", false},
		{"read x", "a\nb\ntouch pwn; echo PWNED-$((6*7))\n", false},
		{"cat", "\x04touch pwn; echo PWNED-$((6*7))\n", false},
	}
	rounds := 20
	if testing.Short() {
		rounds = 2
	}
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			srv, params := tg.connect(t)
			params["name"] = "keys"
			tok := str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])
			call := func(tool string, args map[string]any) map[string]any {
				args["sessionName"], args["sessionToken"] = "keys", tok
				return srv.call(t, tool, args)
			}
			exec := func(cmd string) map[string]any { return call("ssh_exec", map[string]any{"command": cmd}) }
			read := func(id string, off int) map[string]any {
				return mustOK(t, call("ssh_read_output", map[string]any{"commandId": id, "offset": off}))
			}
			dir := str(result(t, mustOK(t, exec("pwd")))["stdout"])
			dir = strings.TrimSpace(dir)
			// Over SSH the shell starts in the login's home: a pwn there
			// from another run is not this one's.
			mustOK(t, exec("rm -f pwn"))
			url := str(mustOK(t, call("ssh_get_monitoring_url", map[string]any{}))["monitoringUrl"])
			v := openViewer(t, url, dataDirToken(t, srv.dataDir))
			tried := make([]int, len(attacks)) // rounds whose keys reached the command, or were refused
			for round := range rounds {
				for i, a := range attacks {
					r := wantError(t, call("ssh_exec", map[string]any{"command": a.cmd, "timeoutSeconds": 0.35}), "command_timeout")
					r = call("ssh_send_input", map[string]any{"commandId": r["commandId"], "input": a.keys, "waitSeconds": 5})
					switch {
					case r["error"] == "no_command_running":
						// The command ended first (a loaded machine): nothing
						// was typed.
					case a.refused && r["error"] != "invalid_arguments":
						t.Fatalf("round %d, %q: %v; want invalid_arguments", round, a.keys, r)
					case a.refused && !strings.Contains(str(r["message"]), "ssh_cancel"):
						t.Errorf("the refusal does not name ssh_cancel: %v", r)
					case !a.refused && r["success"] != true:
						t.Fatalf("round %d, %q: %v", round, a.keys, r)
					default:
						tried[i]++
					}
					line := fmt.Sprintf("echo human-%d-%d", round, i)
					v.paste(t, line+"\r")
					got := humanReport(t, exec, read, 1, 0)
					if len(got) != 1 || got[0]["command"] != line || got[0]["unattributed"] == true {
						t.Fatalf("round %d, %q + %q: the gate reported %v; want the human's %q alone", round, a.cmd, a.keys, got, line)
					}
				}
			}
			for i, n := range tried {
				if n == 0 {
					t.Errorf("%q was never sent while its command ran", attacks[i].keys)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "pwn")); err == nil {
				t.Errorf("the agent's keys ran at the prompt: %s/pwn exists", dir)
			}
			v.mu.Lock()
			screen := v.screen.String()
			v.mu.Unlock()
			if strings.Contains(screen, "PWNED-42") {
				t.Errorf("the agent's keys ran at the prompt; the terminal showed %q", lastN(screen, 2000))
			}
		})
	}
}

// TestSendInputAudited: the audit keeps what the agent typed, with the
// secrets of the workspace's .env replaced as in output; at a prompt that
// does not echo (read -s) only its size.
func TestSendInputAudited(t *testing.T) {
	ws := t.TempDir()
	const secret = "velvet-orbit-2291-quasar"
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("DEPLOY_PASSPHRASE="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOpts{dir: ws,
		config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + "}\nredact:\n  secretFiles: [.env]\n"})
	s := connectTo(t, srv, "dev", "dev")
	send := func(cmd, prompt, input string) {
		t.Helper()
		r := wantError(t, s.exec(t, cmd, 1), "command_timeout")
		if !strings.Contains(str(r["lastLine"]), prompt) {
			t.Fatalf("%s: not at its prompt: %v", cmd, r)
		}
		r = mustOK(t, srv.call(t, "ssh_send_input", map[string]any{"sessionName": s.name, "sessionToken": s.tok,
			"commandId": r["commandId"], "input": input, "submit": true, "waitSeconds": 5}))
		if r["running"] != false {
			t.Fatalf("%s: still running after the input: %v", cmd, r)
		}
	}
	send(`read -p 'key? ' k; echo "${#k}"`, "key?", "typed-in-clear "+secret)
	send(`read -s -p 'password? ' p; echo "${#p}"`, "password?", "hunter2-"+secret)
	var inputs []string
	for _, rec := range auditRecords(t, srv.dataDir) {
		if rec.Tool == "ssh_send_input" {
			inputs = append(inputs, string(rec.Args))
		}
	}
	if len(inputs) != 2 {
		t.Fatalf("%d ssh_send_input records; want 2: %v", len(inputs), inputs)
	}
	for _, in := range inputs {
		if strings.Contains(in, secret) || strings.Contains(in, "hunter2") {
			t.Errorf("the audit holds a secret the agent typed: %s", in)
		}
	}
	if !strings.Contains(inputs[0], "typed-in-clear [REDACTED:") {
		t.Errorf("the audit of input at an echoing prompt: %s; want the text, redacted", inputs[0])
	}
	if !strings.Contains(inputs[1], "[hidden: ") {
		t.Errorf("the audit of input at a prompt without echo: %s; want its size alone", inputs[1])
	}
}
