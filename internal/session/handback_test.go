package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
)

// TestHandBack: while the agent's request for the human is open, the
// agent's actions are refused and the human's commands wait for the
// hand-back, which delivers them with the note, once.
func TestHandBack(t *testing.T) {
	m := session.NewManager(nil)
	t.Cleanup(m.Shutdown)
	s, _ := create(t, m, alice, "h")
	ctx := context.Background()
	r, opened := s.RequestHuman("enter the sudo password")
	if !opened || r.ID == "" {
		t.Fatalf("request: %+v %v", r, opened)
	}
	if again, opened := s.RequestHuman("another"); opened || again.ID != r.ID {
		t.Fatalf("a second request while one is open: %+v %v", again, opened)
	}
	if i := s.Info(); i.HumanRequest == nil || i.HumanRequest.ID != r.ID {
		t.Errorf("Info does not name the open request: %+v", i.HumanRequest)
	}
	var held *session.HumanRequestedError
	if _, err := s.Exec(ctx, "echo agent", shell.ExecOptions{Timeout: 5 * time.Second}); !errors.As(err, &held) || held.Request.ID != r.ID {
		t.Fatalf("exec while the human holds the session: %v", err)
	}
	if _, err := s.Cancel(ctx); !errors.As(err, &held) {
		t.Fatalf("cancel while the human holds the session: %v", err)
	}
	if _, err := s.SendInput(ctx, "x", []byte("y")); !errors.As(err, &held) {
		t.Fatalf("input while the human holds the session: %v", err)
	}

	// The human runs two commands; the gate keeps them for the hand-back.
	for _, line := range []string{"echo one\r", "echo two\r"} {
		if err := s.Input(ctx, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Info().Last == nil || s.Info().Last.Command != "echo two" || s.Info().Last.Running {
		if time.Now().After(deadline) {
			t.Fatalf("the human's commands did not run: %+v", s.Info().Last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Gate(); err != nil {
		t.Fatalf("the gate gave the human's commands away before the hand-back: %v", err)
	}
	if _, _, done, err := s.AwaitHandBack(ctx, r.ID, 50*time.Millisecond, nil); done || err != nil {
		t.Fatalf("before the hand-back: done %v, %v", done, err)
	}
	if err := s.HandBack("hr_wrong", "", "bob"); !errors.Is(err, session.ErrNoHumanRequest) {
		t.Fatalf("hand-back of another id: %v", err)
	}
	if err := s.HandBack(r.ID, "done, password entered", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := s.HandBack(r.ID, "twice", "bob"); !errors.Is(err, session.ErrNoHumanRequest) {
		t.Fatalf("a second hand-back: %v", err)
	}
	got, gate, done, err := s.AwaitHandBack(ctx, r.ID, time.Second, nil)
	if err != nil || !done || got.Note != "done, password entered" || got.By != "bob" {
		t.Fatalf("the hand-back: %+v %v %v", got, done, err)
	}
	if gate == nil || len(gate.Commands) != 2 || gate.Commands[0].Command != "echo one" || gate.Commands[1].Command != "echo two" {
		t.Fatalf("the human's commands: %+v", gate)
	}
	if _, _, _, err := s.AwaitHandBack(ctx, r.ID, time.Second, nil); !errors.Is(err, session.ErrNoHumanRequest) {
		t.Fatalf("a request answered twice: %v", err)
	}
	if rec, err := s.Exec(ctx, "echo agent", shell.ExecOptions{Timeout: 5 * time.Second}); err != nil || rec.Stdout.String() != "agent\n" {
		t.Fatalf("after the hand-back the session is the agent's, and the commands are not reported twice: %v", err)
	}
	if err := s.HandBack(r.ID, string(make([]byte, 5000)), "bob"); err == nil {
		t.Error("an oversized note was taken")
	}
}

// TestDenialsKept: a session keeps its latest five refused actions for
// the monitoring page, oldest first, and tells its watchers of each.
func TestDenialsKept(t *testing.T) {
	m := session.NewManager(nil)
	t.Cleanup(m.Shutdown)
	s, _ := create(t, m, alice, "d")
	told := make(chan struct{}, 16)
	stop := s.Changes(func() { told <- struct{}{} })
	defer stop()
	for i := range 7 {
		s.NoteDenied(session.Denial{Tool: "ssh_exec", Command: fmt.Sprintf("rm %d", i), Rule: "rules[1]"})
	}
	got := s.Denied()
	if len(got) != 5 || got[0].Command != "rm 2" || got[4].Command != "rm 6" {
		t.Fatalf("denials kept: %+v", got)
	}
	if len(told) != 7 {
		t.Errorf("watchers told %d times, want 7", len(told))
	}
}
