package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestApprovalBoundToCwd: while rm waits for approval in proj/, another
// call of the same session changes to ../important. The approval of rm
// in proj/ is then not enough: rm is judged again in important/, with a
// new approval that shows it, and its denial leaves important/data.txt
// alone. Over a local sandboxed session and over a real sshd.
func TestApprovalBoundToCwd(t *testing.T) {
	for _, kind := range []string{"local", "ssh"} {
		t.Run(kind, func(t *testing.T) {
			rules := []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}, {Command: "rm *", Decision: "ask"}}
			f, b := withPolicy(t, "allow", rules, approval.Options{Wait: 30 * time.Second})
			c := f.client(t)
			root := f.workspace
			var s mcptest.Session
			switch kind {
			case "local":
				s = connect(t, c, "w")
			case "ssh":
				d := testenv.SSHD(t)
				root = t.TempDir()
				r := mcptest.MustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "w", "host": d.Host, "port": d.Port,
					"username": d.User, "keyFilePath": d.ClientKeyFile}))
				s = mcptest.Session{Name: "w", Token: mcptest.Str(r["sessionToken"])}
			}
			proj, important := filepath.Join(root, "proj"), filepath.Join(root, "important")
			for _, dir := range []string{proj, important} {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte(dir), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			mcptest.MustOK(t, exec(t, c, s, "cd "+proj))

			replies := make(chan map[string]any, 1)
			go func() { replies <- exec(t, c, s, "rm data.txt") }()
			first := waitPending(t, b, "")
			if first.Action.Cwd != proj {
				t.Fatalf("the approval shows cwd %q, want %q", first.Action.Cwd, proj)
			}
			// Another call moves the shell while the approval waits.
			if got := mcptest.Result(t, exec(t, c, s, "cd ../important && pwd"))["stdout"]; got != important+"\n" {
				t.Fatalf("cd ../important: %q", got)
			}
			if _, err := b.Decide(context.Background(), first.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
				t.Fatal(err)
			}
			// rm asks again, showing where it would now run.
			again := waitPending(t, b, first.ID)
			if again.Action.Cwd != important || again.Action.Command != "rm data.txt" || again.Fingerprint == first.Fingerprint {
				t.Fatalf("the new approval: %+v", again.Action)
			}
			for _, dir := range []string{proj, important} {
				if _, err := os.Stat(filepath.Join(dir, "data.txt")); err != nil {
					t.Fatalf("rm ran before the second approval: %v", err)
				}
			}
			if _, err := b.Decide(context.Background(), again.ID, approval.Decision{By: approval.ByDashboard, Reason: "not there"}); err != nil {
				t.Fatal(err)
			}
			var r map[string]any
			select {
			case r = <-replies:
			case <-time.After(30 * time.Second):
				t.Fatal("rm did not answer after its second approval was denied")
			}
			if errCode(r) != "approval_denied" || mcptest.Str(r["approvalId"]) != again.ID {
				t.Fatalf("rm after the directory changed: %v", mcptest.Short(r))
			}
			for _, dir := range []string{proj, important} {
				if _, err := os.Stat(filepath.Join(dir, "data.txt")); err != nil {
					t.Errorf("%s/data.txt: %v", dir, err)
				}
			}
			// The shell never saw rm; approved where it now is, it runs there.
			if h := f.history(t, c, s); strings.Contains(h, "rm data.txt") {
				t.Errorf("rm reached the shell:\n%s", h)
			}
			answer(t, b, approval.Decision{Approved: true, By: approval.ByDashboard})
			mcptest.MustOK(t, exec(t, c, s, "rm data.txt"))
			if _, err := os.Stat(filepath.Join(important, "data.txt")); !os.IsNotExist(err) {
				t.Errorf("approved in important/, rm did not run there: %v", err)
			}
		})
	}
}

// waitPending waits for a pending approval other than skip and returns it.
func waitPending(t *testing.T, b *approval.Broker, skip string) approval.Approval {
	t.Helper()
	ch := make(chan struct{}, 1)
	stop := b.Watch(func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	defer stop()
	deadline := time.After(20 * time.Second)
	for {
		for _, p := range b.Pending() {
			if p.ID != skip {
				return p
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no pending approval appeared in 20 s")
		}
	}
}

// TestApprovalBoundToCwdHuman: while rm waits for approval, the human at
// the browser changes directory. The approval of rm in proj/ is not
// enough: the call reports the human's command and runs nothing, and the
// agent's repeat asks again, showing the new directory.
func TestApprovalBoundToCwdHuman(t *testing.T) {
	rules := []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}, {Command: "rm *", Decision: "ask"}}
	f, b := withPolicy(t, "allow", rules, approval.Options{Wait: 30 * time.Second})
	c := f.client(t)
	s := connect(t, c, "h")
	proj, important := filepath.Join(f.workspace, "proj"), filepath.Join(f.workspace, "important")
	for _, dir := range []string{proj, important} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte(dir), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mcptest.MustOK(t, exec(t, c, s, "cd "+proj))
	u := mcptest.Str(mcptest.MustOK(t, c.Call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))["monitoringUrl"])
	sess, ok := f.sessions.ByMonitorKey(u[strings.LastIndex(u, "/")+1:])
	if !ok {
		t.Fatal("no session behind the monitoring URL")
	}

	replies := make(chan map[string]any, 1)
	go func() { replies <- exec(t, c, s, "rm data.txt") }()
	first := waitPending(t, b, "")
	if err := sess.Input(context.Background(), []byte("cd ../important\r")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sess.Info().Cwd != important { // what the human's terminal shows next
		if time.Now().After(deadline) {
			t.Fatalf("the human's cd never took effect: cwd %q", sess.Info().Cwd)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Decide(context.Background(), first.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
		t.Fatal(err)
	}
	r := <-replies
	if errCode(r) != "user_activity_detected" {
		t.Fatalf("rm after the human's cd: %v", mcptest.Short(r))
	}
	for _, dir := range []string{proj, important} {
		if _, err := os.Stat(filepath.Join(dir, "data.txt")); err != nil {
			t.Fatalf("rm ran: %v", err)
		}
	}
	go func() { replies <- exec(t, c, s, "rm data.txt") }()
	again := waitPending(t, b, first.ID)
	if again.Action.Cwd != important {
		t.Fatalf("the repeat's approval shows cwd %q, want %q", again.Action.Cwd, important)
	}
	if _, err := b.Decide(context.Background(), again.ID, approval.Decision{By: approval.ByDashboard, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if r := <-replies; errCode(r) != "approval_denied" {
		t.Fatalf("the repeat: %v", mcptest.Short(r))
	}
	if _, err := os.Stat(filepath.Join(important, "data.txt")); err != nil {
		t.Fatalf("important/data.txt: %v", err)
	}
}

// TestApprovalCwdKeepsChanging: a directory that changes after every
// approval ends the call with session_busy (cwd_changed), having run
// nothing, rather than asking for ever.
func TestApprovalCwdKeepsChanging(t *testing.T) {
	rules := []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}, {Command: "rm *", Decision: "ask"}}
	f, b := withPolicy(t, "allow", rules, approval.Options{Wait: 30 * time.Second})
	c := f.client(t)
	s := connect(t, c, "k")
	var dirs []string
	for _, name := range []string{"d0", "d1", "d2", "d3"} {
		dir := filepath.Join(f.workspace, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.txt"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	mcptest.MustOK(t, exec(t, c, s, "cd "+dirs[0]))
	replies := make(chan map[string]any, 1)
	go func() { replies <- exec(t, c, s, "rm data.txt") }()
	last := ""
	for i := 1; i <= 3; i++ {
		p := waitPending(t, b, last)
		if p.Action.Cwd != dirs[i-1] {
			t.Fatalf("approval %d shows cwd %q, want %q", i, p.Action.Cwd, dirs[i-1])
		}
		mcptest.MustOK(t, exec(t, c, s, "cd "+dirs[i]))
		if _, err := b.Decide(context.Background(), p.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
			t.Fatal(err)
		}
		last = p.ID
	}
	r := <-replies
	if errCode(r) != "session_busy" || r["reason"] != "cwd_changed" || r["cwd"] != dirs[3] {
		t.Fatalf("after three moves: %v", mcptest.Short(r))
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "data.txt")); err != nil {
			t.Errorf("rm ran in %s: %v", dir, err)
		}
	}
}
