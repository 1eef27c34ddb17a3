package shell_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

type harness struct {
	sh     *shell.Shell
	mu     sync.Mutex
	user   []shell.Record
	agent  []shell.Record // every finished agent command, as OnCommand saw it
	screen bytes.Buffer
}

func start(t *testing.T, d shell.Dialer) *harness {
	t.Helper()
	h := &harness{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sh, err := shell.Start(ctx, d, &shell.Options{OnCommand: func(r shell.Record) {
		h.mu.Lock()
		if r.Source == "user" {
			h.user = append(h.user, r)
		} else {
			h.agent = append(h.agent, r)
		}
		h.mu.Unlock()
	}, Output: func(p []byte) {
		h.mu.Lock()
		h.screen.Write(p)
		h.mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	h.sh = sh
	return h
}

func (h *harness) exec(t *testing.T, cmd string) shell.Record {
	t.Helper()
	rec, err := h.sh.Exec(context.Background(), cmd, shell.ExecOptions{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return rec
}

// users waits until n human commands were recorded.
func (h *harness) users(t *testing.T, n int) []shell.Record {
	t.Helper()
	return h.usersWithin(t, n, 10*time.Second)
}

// usersWithin is users with its own bound; it returns once n commands, or
// more, were recorded.
func (h *harness) usersWithin(t *testing.T, n int, d time.Duration) []shell.Record {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		got := append([]shell.Record(nil), h.user...)
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	buf := make([]byte, 1<<20)
	t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
	screen := h.screen.String()
	if len(screen) > 4000 {
		screen = "…" + screen[len(screen)-4000:]
	}
	t.Fatalf("wanted %d user commands, got %d; the terminal showed:\n%q", n, len(h.user), screen)
	return nil
}

// idle waits until the shell accepts an agent command again.
func (h *harness) idle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err := h.sh.Exec(context.Background(), "true", shell.ExecOptions{Timeout: 5 * time.Second})
		var busy *shell.BusyError
		if !errors.As(err, &busy) {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("shell never became idle")
}

func TestExecContract(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	tests := []struct {
		cmd            string
		stdout, stderr string
		exit           int
	}{
		{"cd /tmp && export A=1", "", "", 0},
		{"pwd; echo $A", "/tmp\n1\n", "", 0},
		{"sh -c 'echo out; echo err >&2; exit 3'", "out\n", "err\n", 3},
		{`printf '\000\377'`, "\x00\xff", "", 0},
		{"false", "", "", 1},
		{"printf 'a\\tb\\n'; printf 'x' >&2", "a\tb\n", "x", 0},
		{"echo one\necho two", "one\ntwo\n", "", 0},
		{`printf '\033]133;D;0\007'; exit_code() { return 5; }; exit_code`, "\x1b]133;D;0\x07", "", 5},
		{`printf '\033]133;A\007\033]633;P;Cwd=/forged\007'; echo ok`, "\x1b]133;A\x07\x1b]633;P;Cwd=/forged\x07ok\n", "", 0},
	}
	for _, tc := range tests {
		rec := h.exec(t, tc.cmd)
		if rec.Stdout.String() != tc.stdout || rec.Stderr.String() != tc.stderr || rec.ExitCode != tc.exit || !rec.ExitKnown {
			t.Errorf("%q: got stdout %q stderr %q exit %d/%v; want %q %q %d", tc.cmd, rec.Stdout.String(), rec.Stderr.String(), rec.ExitCode, rec.ExitKnown, tc.stdout, tc.stderr, tc.exit)
		}
	}
	if got := h.exec(t, "pwd").Cwd; got != "/tmp" {
		t.Errorf("cwd after forged P mark = %q, want /tmp", got)
	}
	if len(h.user) != 0 {
		t.Errorf("agent commands were recorded as user commands: %+v", h.user)
	}
}

func TestSyntaxErrorDoesNotWedge(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	rec := h.exec(t, "if then")
	if rec.ExitCode != 2 || !strings.Contains(rec.Stderr.String(), "syntax error") {
		t.Errorf("syntax error: exit %d stderr %q", rec.ExitCode, rec.Stderr)
	}
	if got := h.exec(t, "echo fine"); got.Stdout.String() != "fine\n" {
		t.Errorf("after syntax error: %q", got.Stdout)
	}
}

func TestLargeOutputExact(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	rec := h.exec(t, "seq 1 200000")
	var want bytes.Buffer
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if !bytes.Equal(rec.Stdout.Bytes(), want.Bytes()) {
		t.Fatalf("seq output differs: got %d bytes, want %d", rec.Stdout.Size(), want.Len())
	}
}

func TestHumanCommandsRecorded(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	h.exec(t, "cd /tmp")
	ctx := context.Background()
	if err := h.sh.Input(ctx, []byte("cd /var && echo hi\r")); err != nil {
		t.Fatal(err)
	}
	h.users(t, 1)
	if err := h.sh.Input(ctx, []byte("false\r")); err != nil {
		t.Fatal(err)
	}
	got := h.users(t, 2)
	if got[0].Command != "cd /var && echo hi" || got[0].ExitCode != 0 || got[0].Stdout.String() != "hi\n" || got[0].Cwd != "/var" || !got[0].Merged {
		t.Errorf("first user command: %+v", got[0])
	}
	if got[1].Command != "false" || got[1].ExitCode != 1 || got[1].Started.Before(got[0].Started) {
		t.Errorf("second user command: %+v", got[1])
	}
	h.idle(t)
	if rec := h.exec(t, "pwd"); rec.Stdout.String() != "/var\n" {
		t.Errorf("agent after human cd: %q", rec.Stdout)
	}
}

func TestBusyOnPartialLine(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	if err := h.sh.Input(context.Background(), []byte("echo half")); err != nil {
		t.Fatal(err)
	}
	_, err := h.sh.Exec(context.Background(), "echo agent", shell.ExecOptions{})
	var busy *shell.BusyError
	if !errors.As(err, &busy) || busy.Line != "echo half" {
		t.Fatalf("want busy with the partial line, got %v", err)
	}
	// The human's line survives: finishing it runs the human's command.
	if err := h.sh.Input(context.Background(), []byte("-done\r")); err != nil {
		t.Fatal(err)
	}
	if got := h.users(t, 1); got[0].Stdout.String() != "half-done\n" {
		t.Errorf("human line after refusal: %+v", got[0])
	}
}

func TestTimeoutBusyCancel(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	_, err := h.sh.Exec(context.Background(), "echo started; sleep 30", shell.ExecOptions{Timeout: 300 * time.Millisecond})
	var te *shell.TimeoutError
	if !errors.As(err, &te) || te.Partial.Stdout.String() != "started\n" {
		t.Fatalf("want timeout with partial output, got %v", err)
	}
	_, err = h.sh.Exec(context.Background(), "true", shell.ExecOptions{})
	var busy *shell.BusyError
	if !errors.As(err, &busy) || !strings.Contains(busy.Command, "sleep 30") {
		t.Fatalf("want busy naming the running command, got %v", err)
	}
	rec, err := h.sh.Cancel(context.Background(), time.Second)
	if err != nil || rec.ExitCode != 130 {
		t.Fatalf("cancel: %v, exit %d", err, rec.ExitCode)
	}
	if rec := h.exec(t, "echo after"); rec.Stdout.String() != "after\n" {
		t.Errorf("after cancel: %q", rec.Stdout)
	}
	h.mu.Lock()
	reported := len(h.agent) >= 2 && h.agent[len(h.agent)-2].Command == "echo started; sleep 30" && h.agent[len(h.agent)-2].ExitCode == 130
	h.mu.Unlock()
	if !reported {
		t.Error("the timed-out command was not reported when it ended")
	}
	if _, err := h.sh.Cancel(context.Background(), time.Second); !errors.Is(err, shell.ErrNotRunning) {
		t.Errorf("cancel with nothing running: %v", err)
	}
}

func TestUserRCLoadsAndSurvivesStrictOptions(t *testing.T) {
	rc := "set -uo pipefail\nalias ll='echo aliased'\nexport FROM_RC=yes\nPROMPT_COMMAND='true'\n"
	h := start(t, &ptyDialer{t: t, rc: rc})
	if rec := h.exec(t, "echo $FROM_RC; [[ $- == *u* ]] && echo strict"); rec.Stdout.String() != "yes\nstrict\n" {
		t.Errorf("user rc: %q", rec.Stdout)
	}
	if rec := h.exec(t, "false | true; echo $?"); rec.Stdout.String() != "1\n" {
		t.Errorf("pipefail: %q", rec.Stdout)
	}
}

// TestSlowStartupFilesNamed: when the user's rc never finishes, Start gives
// up at its deadline and says where the shell got to.
func TestSlowStartupFilesNamed(t *testing.T) {
	// Long enough for bash to start and print under a loaded CI machine; the
	// rc sleeps far longer.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sh, err := shell.Start(ctx, &ptyDialer{t: t, rc: "echo waiting-for-a-lock; sleep 30\n"}, nil)
	if err == nil {
		_ = sh.Close()
		t.Fatal("Start succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "startup files") || !strings.Contains(msg, "waiting-for-a-lock") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q", msg)
	}
}

func TestNonceNotVisibleToChildren(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	rec := h.exec(t, `cat /proc/$$/environ | tr '\0' '\n'; cat /proc/$$/cmdline; echo "$PS1"; env`)
	if bytes.Contains(rec.Stdout.Bytes(), []byte("n=")) && bytes.Contains(rec.Stdout.Bytes(), []byte("633")) {
		t.Errorf("a mark leaked to a child: %q", rec.Stdout)
	}
}

func TestWatchReplaysScrollback(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	h.exec(t, "echo replay-me")
	ctx, cancel := context.WithCancel(context.Background())
	var got bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- h.sh.Watch(ctx, func(p []byte) error {
			got.Write(p)
			if bytes.Contains(got.Bytes(), []byte("live-too")) {
				cancel()
			}
			return nil
		})
	}()
	h.exec(t, "echo live-too")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch never saw live output")
	}
	cancel()
	if !bytes.Contains(got.Bytes(), []byte("replay-me\r\n")) || bytes.Contains(got.Bytes(), []byte("n=")) {
		t.Errorf("viewer stream: %q", got.String())
	}
}

func TestControlBytesInCwdAndCommand(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	rec := h.exec(t, `d=$(mktemp -d)/$'a\030b\032c;d\\e'; mkdir -p "$d" && cd "$d" && echo in`)
	if rec.Stdout.String() != "in\n" || !strings.HasSuffix(rec.Cwd, "/a\x18b\x1ac;d\\e") {
		t.Errorf("cwd with control bytes: %q (stdout %q)", rec.Cwd, rec.Stdout)
	}
	if err := h.sh.Input(context.Background(), []byte("echo $'x\\030y'\r")); err != nil {
		t.Fatal(err)
	}
	if got := h.users(t, 1); got[0].Command != `echo $'x\030y'` {
		t.Errorf("user command line: %q", got[0].Command)
	}
}

func TestHumanCtrlCAndResize(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	ctx := context.Background()
	if err := h.sh.Resize(ctx, 132, 41); err != nil {
		t.Fatal(err)
	}
	if rec := h.exec(t, "stty size </dev/tty"); rec.Stdout.String() != "41 132\n" {
		t.Errorf("after resize: %q", rec.Stdout)
	}
	if err := h.sh.Input(ctx, []byte("sleep 30\r")); err != nil {
		t.Fatal(err)
	}
	// Wait until sleep really runs as the shell's child: PS0 (the start
	// mark) prints before bash forks, and a Ctrl-C in that gap hits bash.
	deadline := time.Now().Add(5 * time.Second)
	children := fmt.Sprintf("/proc/%d/task/%d/children", h.sh.PID(), h.sh.PID())
	for {
		kids, _ := os.ReadFile(children)
		if pid := strings.TrimSpace(string(kids)); pid != "" {
			if comm, _ := os.ReadFile("/proc/" + strings.Fields(pid)[0] + "/comm"); string(comm) == "sleep\n" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.sh.Input(ctx, []byte{3}); err != nil {
		t.Fatal(err)
	}
	got := h.users(t, 1)
	if got[0].Command != "sleep 30" || got[0].ExitCode != 130 || got[0].Duration > 10*time.Second {
		t.Errorf("Ctrl-C'd command: %+v", got[0])
	}
	if err := h.sh.Resize(ctx, 0, 10); err == nil {
		t.Error("a 0-column resize was accepted")
	}
}

// TestTypeAheadNeverRunsAStaleLine: a human's typed-ahead command races the
// agent's staging. The agent's command must run exactly once, or be
// refused as busy, and never surface later as a stale line.
func TestTypeAheadNeverRunsAStaleLine(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		h.exec(t, "true")
		if err := h.sh.Input(ctx, []byte("sleep 0.2\r")); err != nil {
			t.Fatal(err)
		}
		ran := 0
		for ran == 0 {
			_, err := h.sh.Exec(ctx, "echo agent >> ran.log", shell.ExecOptions{Timeout: 10 * time.Second})
			var busy *shell.BusyError
			switch {
			case err == nil:
				ran++
			case errors.As(err, &busy):
				time.Sleep(10 * time.Millisecond)
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	h.idle(t)
	if rec := h.exec(t, "wc -l < ran.log"); rec.Stdout.String() != "5\n" {
		t.Errorf("the agent's command ran %q times, want 5", rec.Stdout.String())
	}
	for _, u := range h.users(t, 5) {
		if u.Command != "sleep 0.2" {
			t.Errorf("unexpected human command %q (a stale agent line?)", u.Command)
		}
	}
}

// slowDialer delivers the terminal one byte per read, so every mark and
// the handshake's hello arrive split.
type slowDialer struct{ ptyDialer }

type slowConn struct{ shell.Conn }

func (c slowConn) Read(p []byte) (int, error) { return c.Conn.Read(p[:1]) }

func (d *slowDialer) Dial(ctx context.Context, l shell.Launch) (shell.Conn, error) {
	c, err := d.ptyDialer.Dial(ctx, l)
	if err != nil {
		return nil, err
	}
	return slowConn{c}, nil
}

func TestMarksSplitAcrossReads(t *testing.T) {
	h := start(t, &slowDialer{ptyDialer{t: t}})
	if rec := h.exec(t, "cd /tmp; echo split"); rec.Stdout.String() != "split\n" || rec.Cwd != "/tmp" {
		t.Errorf("byte-at-a-time terminal: %q in %q", rec.Stdout.String(), rec.Cwd)
	}
}

// TestHumanPasswordPromptAndFullScreen: a hidden prompt and a full-screen
// program work for the human and end as ordinary recorded commands; the
// hidden answer is not echoed.
func TestHumanPasswordPromptAndFullScreen(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	ctx := context.Background()
	steps := []struct {
		keys, wait string
	}{
		// The prompt itself, not its echo on the command line: keys typed
		// before read switches the terminal back to canonical mode would sit
		// there without their line ending (readline clears ICRNL), and read
		// would wait for ever, as it would for a person typing that early.
		{"read -s -p 'Password: ' pw; echo; echo got-${#pw}\r", "\rPassword: "},
		{"hunter2\r", ""},
	}
	for _, st := range steps {
		if err := h.sh.Input(ctx, []byte(st.keys)); err != nil {
			t.Fatal(err)
		}
		h.waitScreen(t, st.wait)
	}
	got := h.users(t, 1)
	if got[0].ExitCode != 0 || !strings.Contains(got[0].Stdout.String(), "got-7") || strings.Contains(got[0].Stdout.String(), "hunter2") {
		t.Errorf("password prompt: %+v %q", got[0], got[0].Stdout.String())
	}
	if err := h.sh.Input(ctx, []byte("seq 1 500 | less\r")); err != nil {
		t.Fatal(err)
	}
	h.waitScreen(t, "\x1b[?1049h") // less switched to the alternate screen
	if err := h.sh.Input(ctx, []byte("q")); err != nil {
		t.Fatal(err)
	}
	got = h.users(t, 2)
	if got[1].Command != "seq 1 500 | less" || got[1].ExitCode != 0 {
		t.Errorf("full-screen program: %+v", got[1])
	}
	h.idle(t)
}

// waitScreen waits until the terminal has shown s ("" returns at once).
func (h *harness) waitScreen(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		ok := strings.Contains(h.screen.String(), s)
		h.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q", s)
}
