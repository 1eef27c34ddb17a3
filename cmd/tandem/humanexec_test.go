package main

import (
	"testing"
	"time"
)

// TestHumanExecFollowed: the human types exec bash in the monitoring page
// (through its terminal socket), then three commands, then exit. The agent
// is told of the exec and gets shell_integration_lost within 2 s of it,
// never session_busy after those 2 s, and ssh_cancel says the same, not
// no_command_running; the session ends with the human's exit. A shell of
// the human's own (bash, not exec'd) answers the same until they leave it,
// then the agent runs again. Locally and over SSH (issue 29 item 2: every
// call answered session_busy until the human left the new shell).
func TestHumanExecFollowed(t *testing.T) {
	tests := []struct {
		line, says string
		exit       any // the status the gate reports for line
		ends       bool
	}{
		{"exec bash", "with bash", nil, true},
		{"bash", "runs bash, which tandem's integration does not reach", float64(0), false},
	}
	for _, tg := range storyTargets() {
		for _, tc := range tests {
			t.Run(tg.name+"/"+tc.line, func(t *testing.T) {
				t.Parallel()
				srv, params := tg.connect(t)
				params["name"] = "hx"
				s := sess{srv, "hx", str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])}
				mustOK(t, s.exec(t, "echo ready"))
				url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
				v := openViewer(t, url, dataDirToken(t, srv.dataDir))

				told := false
				// The reply to a call, past the gate's reports of the
				// human's commands, one of which names line.
				gated := func(call func() map[string]any) map[string]any {
					for {
						r := call()
						if r["error"] != "user_activity_detected" {
							return r
						}
						for _, c := range r["userCommands"].([]any) {
							if c := c.(map[string]any); c["command"] == tc.line && c["exitCode"] == tc.exit {
								told = true
							}
						}
					}
				}
				agent := func() map[string]any { return s.exec(t, "echo agent") }
				v.paste(t, tc.line+"\r")
				typed := time.Now()
				// The line shows, and the shell has it. The prompt shows the
				// working directory, which names the test, and so "bash": what
				// shows is the line with its end.
				v.waitFor(t, tc.line+"\r\n", 1)
				lost := false
				for !lost {
					r := gated(agent)
					after := time.Since(typed)
					switch r["error"] {
					case "shell_integration_lost":
						lost = true
						if after > 2*time.Second {
							t.Errorf("shell_integration_lost came %v after the human's line, want within 2 s", after)
						}
						if m := str(r["message"]); !contains(m, "`"+tc.line+"`") || !contains(m, tc.says) {
							t.Errorf("the message does not say what happened: %q", m)
						}
					case "session_busy":
						if after > 2*time.Second {
							t.Fatalf("session_busy %v after the human's %q: %v", after, tc.line, r)
						}
					default:
						t.Fatalf("after the human's %q: %v", tc.line, r)
					}
					if !lost {
						time.Sleep(50 * time.Millisecond)
					}
				}
				wantError(t, gated(func() map[string]any {
					return srv.call(t, "ssh_cancel", map[string]any{"sessionName": s.name, "sessionToken": s.tok})
				}), "shell_integration_lost")

				// The human works in the new shell: every agent call answers
				// at once, lost, never busy.
				for _, c := range []string{"echo h-one", "cd /", "echo h-$((1+2))"} {
					v.paste(t, c+"\r")
					begin := time.Now()
					if r := gated(agent); r["error"] != "shell_integration_lost" {
						t.Fatalf("agent call after the human's %q in the new shell: %v", c, r)
					}
					if d := time.Since(begin); d > time.Second {
						t.Errorf("agent call after the human's %q took %v", c, d)
					}
				}
				v.waitFor(t, "h-3", 1)
				v.paste(t, "exit\r")
				var r map[string]any
				waitUntil(t, func() bool {
					r = gated(agent)
					// The human's Enter on exit was read by the inner shell,
					// not a line of the session's: the prompt after it is
					// idle a second later (the README's known limits). And
					// between the inner shell's end and the outer prompt,
					// the human's line itself is still running, briefly.
					ending := r["reason"] == "human_command" && r["runningCommand"] == tc.line && r["runningForMs"] != nil
					if r["error"] == "session_busy" && r["reason"] != "not_idle" && !ending {
						t.Fatalf("session_busy after the human left the new shell: %v", r)
					}
					return r["error"] != "shell_integration_lost" && r["error"] != "session_busy"
				})
				switch {
				case tc.ends && (r["error"] != "session_ended" || r["reason"] != "human_exit"):
					t.Errorf("after the human's exit: %v", r)
				case !tc.ends && result(t, r)["stdout"] != "agent\n":
					t.Errorf("after the human left their shell: %v", r)
				}
				if !told {
					t.Errorf("no reply named the human's %q with status %v", tc.line, tc.exit)
				}
			})
		}
	}
}

// TestAgentExecBashAnswersFast: the agent's own exec bash answers
// shell_integration_lost within 2 s (it took the whole 50 s timeout), and
// the calls after it at once (they took 5 s each); locally and over SSH.
func TestAgentExecBashAnswersFast(t *testing.T) {
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			srv, params := tg.connect(t)
			params["name"] = "ax"
			s := sess{srv, "ax", str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])}
			mustOK(t, s.exec(t, "echo ready"))
			begin := time.Now()
			e := wantError(t, s.exec(t, "exec bash"), "shell_integration_lost")
			if d := time.Since(begin); d > 2*time.Second {
				t.Errorf("exec bash answered after %v, want within 2 s", d)
			}
			if m := str(e["message"]); !contains(m, "with bash") {
				t.Errorf("the message does not say what replaced the shell: %q", m)
			}
			for i := range 3 {
				begin := time.Now()
				wantError(t, s.exec(t, "echo again"), "shell_integration_lost")
				if d := time.Since(begin); d > time.Second {
					t.Errorf("call %d after exec bash took %v", i, d)
				}
			}
		})
	}
}
