package shell_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/local"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// dialers are the backends the exactness tests run against: bash in a
// plain PTY, the local backend (unsandboxed here; the sandbox has its own
// tests) and a real OpenSSH sshd on loopback.
func dialers(t *testing.T) map[string]func(t *testing.T) shell.Dialer {
	return map[string]func(t *testing.T) shell.Dialer{
		"pty":   func(t *testing.T) shell.Dialer { return &ptyDialer{t: t} },
		"local": func(t *testing.T) shell.Dialer { return &local.Options{NoSandbox: true, Workspace: t.TempDir()} },
		"ssh": func(t *testing.T) shell.Dialer {
			srv := testenv.SSHD(t)
			return &sshconn.Options{Host: srv.Host, Port: srv.Port, User: srv.User,
				KeyFile: srv.ClientKeyFile, KnownHostsFile: srv.KnownHostsFile}
		},
	}
}

// TestCommandShapes: whatever the shape of the agent's line, its stdout,
// stderr and status are captured exactly (issue 6 item 7: a leading
// subshell used to lose its output and report success).
func TestCommandShapes(t *testing.T) {
	tests := []struct {
		cmd            string
		stdout, stderr string
		exit           int
	}{
		{"(echo a)", "a\n", "", 0},
		{"(echo a; exit 3)", "a\n", "", 3},
		{"(cd / && pwd)", "/\n", "", 0},
		{" (echo lead; echo err >&2)", "lead\n", "err\n", 0},
		{"((1 + 1 == 2)) && echo arith", "arith\n", "", 0},
		{"( (echo nested) )", "nested\n", "", 0},
		{"(echo a) | tr a b", "b\n", "", 0},
		{"{ echo g; echo e >&2; }", "g\n", "e\n", 0},
		{"{ (echo gs); }", "gs\n", "", 0},
		{"! (false)", "", "", 0},
		{"f() { echo fn; return 4; }; f", "fn\n", "", 4},
		{"echo p | tr p q", "q\n", "", 0},
		{"true && echo and || echo or", "and\n", "", 0},
		{"false || echo or", "or\n", "", 0},
		{"false && echo never", "", "", 1},
		{"sleep 0.1 & wait; echo bg", "bg\n", "", 0},
		{"cat <<'EOF'\nline1\n$HOME\nEOF", "line1\n$HOME\n", "", 0},
		{"(echo a)\n(echo b; exit 5)", "a\nb\n", "", 5},
		{"exec >/dev/null; echo hidden", "", "", 0},
		{"echo visible-again", "visible-again\n", "", 0},
		{"(set -e; false; echo no)", "", "", 1},
		{"(trap 'echo bye' EXIT; echo hi)", "hi\nbye\n", "", 0},
		{"trap 'echo usr1' USR1; kill -USR1 $$; trap - USR1", "usr1\n", "", 0},
		{"(seq 1 20000) | tail -n 1", "20000\n", "", 0},
		{"echo (", "", "bash: syntax error near unexpected token `newline'\n", 2},
		{"echo 'unclosed", "", "tandem: the command is incomplete: bash asked for a continuation line (an unclosed quote, parenthesis, block or here-document?); nothing ran\n", 2},
		{"echo after-incomplete", "after-incomplete\n", "", 0},
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			for _, tc := range tests {
				rec := h.exec(t, tc.cmd)
				stderr := rec.Stderr.String()
				if strings.HasPrefix(tc.cmd, "sleep 0.1 &") {
					// Job control reports the background job on stderr.
					if !regexp.MustCompile(`^\[1\] \d+\n(\[1\]\+ +Done +sleep 0\.1\n)?$`).MatchString(stderr) {
						t.Errorf("%q: stderr %q, want the job's number and pid", tc.cmd, stderr)
					}
					stderr = tc.stderr
				}
				if rec.Stdout.String() != tc.stdout || stderr != tc.stderr || rec.ExitCode != tc.exit || !rec.ExitKnown {
					t.Errorf("%q: got stdout %q stderr %q exit %d/%v; want %q %q %d", tc.cmd, rec.Stdout.String(), rec.Stderr.String(), rec.ExitCode, rec.ExitKnown, tc.stdout, tc.stderr, tc.exit)
				}
			}
			if h.userCount() != 0 {
				t.Errorf("agent commands were recorded as the human's: %d", h.userCount())
			}
		})
	}
}

func (h *harness) userCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.user)
}

// TestLargeCommands: commands up to MaxCommandBytes run exactly, without
// wedging the session (a 64 KiB command used to wedge it for good); a
// larger one is refused with a message naming its size.
func TestLargeCommands(t *testing.T) {
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			// big.txt goes in a directory of the test's, not in the
			// login's home (the developer's own, over SSH).
			if _, err := h.sh.Exec(context.Background(), "cd "+t.TempDir(), shell.ExecOptions{Timeout: 10 * time.Second}); err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{64 << 10, 300 << 10, shell.MaxCommandBytes - 100} {
				line := strings.Repeat("x", 99) + "\n"
				body := strings.Repeat(line, size/100)
				cmd := "cat > big.txt <<'EOF'\n" + body + "EOF\nwc -c < big.txt"
				cmd = cmd[:min(len(cmd), shell.MaxCommandBytes)]
				// A busy machine's bash reads a long line slowly (a byte at
				// a time): give it the stage limit's time and then some.
				rec, err := h.sh.Exec(context.Background(), cmd, shell.ExecOptions{Timeout: 2 * time.Minute})
				if err != nil {
					t.Fatalf("%d-byte command: %v", len(cmd), err)
				}
				if got := strings.TrimSpace(rec.Stdout.String()); got != strconv.Itoa(len(body)) || rec.ExitCode != 0 {
					t.Fatalf("%d-byte command: wc says %q (exit %d, stderr %q), want %d", len(cmd), got, rec.ExitCode, rec.Stderr.String(), len(body))
				}
			}
			_, err := h.sh.Exec(context.Background(), "echo "+strings.Repeat("y", shell.MaxCommandBytes), shell.ExecOptions{})
			if !errors.Is(err, shell.ErrInvalidCommand) || !strings.Contains(err.Error(), strconv.Itoa(shell.MaxCommandBytes+5)) {
				t.Fatalf("oversized command: %v, want ErrInvalidCommand naming the size", err)
			}
			_, err = h.sh.Exec(context.Background(), "echo a\x00b", shell.ExecOptions{})
			if !errors.Is(err, shell.ErrInvalidCommand) {
				t.Fatalf("NUL byte: %v, want ErrInvalidCommand", err)
			}
			if rec := h.exec(t, "echo still-usable"); rec.Stdout.String() != "still-usable\n" {
				t.Fatalf("after refusals: %q", rec.Stdout.String())
			}
		})
	}
}

// TestShellExitIsReported: an agent command that ends the shell gives an
// error wrapping ErrShellExited with the status, not a lost connection.
func TestShellExitIsReported(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		status int
	}{
		{"exit 3", 3},
		{"set -e; false", 1},
		{"false || exit 7", 7},
	} {
		for name, dial := range dialers(t) {
			t.Run(name+"/"+tc.cmd, func(t *testing.T) {
				t.Parallel()
				h := start(t, dial(t))
				h.exec(t, "echo warm")
				rec, err := h.sh.Exec(context.Background(), "echo partial; "+tc.cmd, shell.ExecOptions{Timeout: 20 * time.Second})
				var exit *shell.ExitError
				if !errors.As(err, &exit) || exit.Status != tc.status || !errors.Is(err, shell.ErrShellExited) || errors.Is(err, shell.ErrConnectionLost) {
					t.Fatalf("err = %v, want a shell exit with status %d", err, tc.status)
				}
				if rec.Stdout == nil || rec.Stdout.String() != "partial\n" {
					t.Errorf("partial output lost: %+v", rec)
				}
			})
		}
	}
}

var nonceMark = regexp.MustCompile(`;n=[0-9a-f]{32}`)

// stealNonce does what a hostile program of the same user can do: read
// the shell's memory and find the session nonce in it.
func stealNonce(t *testing.T, pid int) string {
	t.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	re := regexp.MustCompile(`133;A;n=([0-9a-f]{32})`)
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil || hi-lo > 64<<20 {
			continue
		}
		buf := make([]byte, hi-lo)
		n, _ := mem.ReadAt(buf, int64(lo))
		if m := re.FindSubmatch(buf[:n]); m != nil {
			return string(m[1])
		}
	}
	t.Fatal("nonce not found in the shell's memory")
	return ""
}

// TestForgedMarksIgnored: a program that stole the nonce prints marks.
// Without viewer input they make no human command, they cannot change the
// agent's exit code or cut its output, and a gate would see nothing
// (issue 6 item 4).
func TestForgedMarksIgnored(t *testing.T) {
	h := start(t, &local.Options{NoSandbox: true, Workspace: t.TempDir()})
	n := stealNonce(t, h.sh.PID())
	m := func(body string) string { return `\033]` + body + `;n=` + n + `\007` }
	tests := []struct {
		name, cmd      string
		stdout, stderr string
		exit           int
	}{
		{"human command on the tty", "printf '" + m("133;C") + m("633;E;rm -rf ~") + m("133;D;0") + m("633;P;Cwd=/x") + "' >/dev/tty; echo ok",
			"ok\n", "", 0},
		{"end mark on the tty fakes no status", "sh -c \"printf '" + m("133;D;0") + "' >/dev/tty\"; (exit 7)", "", "", 7},
		{"end mark on the relay cuts nothing", "sh -c \"printf '" + m("633;X;eom;status=0;ran=1;cwd=/") + "'; printf '" + m("633;X;eom;status=0;ran=1;cwd=/") + "' >&2; sleep 0.2; echo after; exit 4\"",
			"after\n", "", 4},
	}
	for _, tc := range tests {
		rec := h.exec(t, tc.cmd)
		if rec.Stdout.String() != tc.stdout || rec.Stderr.String() != tc.stderr || rec.ExitCode != tc.exit {
			t.Errorf("%s: got %q %q %d, want %q %q %d", tc.name, rec.Stdout.String(), rec.Stderr.String(), rec.ExitCode, tc.stdout, tc.stderr, tc.exit)
		}
		if rec.Cwd == "/x" {
			t.Errorf("%s: forged cwd taken", tc.name)
		}
	}
	h.exec(t, "true")
	if c := h.userCount(); c != 0 {
		t.Fatalf("forged marks made %d human commands", c)
	}
}

// TestNoNonceInOutput: after the user replaces PROMPT_COMMAND, no output
// that leaves the shell (records, partial records, the viewers' stream)
// carries a mark with the nonce (issue 6 item 5).
func TestNoNonceInOutput(t *testing.T) {
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			var outs []string
			for _, cmd := range []string{`PROMPT_COMMAND="echo hi"`, "echo one; echo two >&2", "(echo sub)"} {
				rec := h.exec(t, cmd)
				outs = append(outs, rec.Stdout.String(), rec.Stderr.String())
			}
			rec, err := h.sh.Exec(context.Background(), "echo slow; sleep 2", shell.ExecOptions{Timeout: 300 * time.Millisecond})
			var timeout *shell.TimeoutError
			if !errors.As(err, &timeout) {
				t.Fatalf("want a timeout, got %v", err)
			}
			outs = append(outs, rec.Stdout.String(), rec.Stderr.String())
			h.idle(t)
			rec = h.exec(t, "echo last")
			if rec.Stdout.String() != "last\n" || rec.Stderr.String() != "" {
				t.Errorf("after PROMPT_COMMAND=...: %q %q", rec.Stdout.String(), rec.Stderr.String())
			}
			h.mu.Lock()
			outs = append(outs, h.screen.String())
			h.mu.Unlock()
			for i, o := range outs {
				if nonceMark.MatchString(o) {
					t.Errorf("output %d carries a nonce mark: %q", i, o)
				}
			}
		})
	}
}

// TestHooksRemovedIsReported: with tandem's hook gone from PROMPT_COMMAND,
// the command still comes back whole and says what was repaired, and the
// terminal gets its fds back: the human sees what they run.
func TestHooksRemovedIsReported(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	rec, err := h.sh.Exec(context.Background(), "unset PROMPT_COMMAND; echo x", shell.ExecOptions{Timeout: 10 * time.Second})
	if err != nil || rec.Stdout.String() != "x\n" || !slices.Equal(rec.Repaired, []string{"prompt_command"}) {
		t.Fatalf("err = %v, stdout %q, repaired %v", err, rec.Stdout.String(), rec.Repaired)
	}
	if err := h.sh.Input(context.Background(), []byte("echo human-sees-this\r")); err != nil {
		t.Fatal(err)
	}
	h.waitScreen(t, "human-sees-this\r\n")
}

// TestCancelledContextInterrupts: a caller that gives up interrupts its
// command, and the session is usable again (issue 6 item 14).
func TestCancelledContextInterrupts(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.sh.Exec(ctx, "echo started; sleep 60", shell.ExecOptions{Timeout: time.Minute})
		done <- err
	}()
	h.waitScreen(t, "started")
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want it to wrap context.Canceled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Exec did not return after its context was cancelled")
	}
	if rec := h.exec(t, "echo usable"); rec.Stdout.String() != "usable\n" {
		t.Fatalf("after cancel: %q", rec.Stdout.String())
	}
}

// TestTypistRace: a human types while agent commands are staged. No human
// byte ever merges into an agent line, every line the shell runs comes
// back as a record, and each record says what ran (issue 6 item 16).
func TestTypistRace(t *testing.T) {
	rounds := map[string]int{"pty": 150, "local": 150, "ssh": 150}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			ctx := context.Background()
			typed := 0
			for i := range rounds[name] {
				typist := make(chan error, 1)
				go func() {
					time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
					typist <- h.sh.Input(ctx, []byte(fmt.Sprintf("echo H%d\r", i)))
				}()
				rec, err := h.sh.Exec(ctx, fmt.Sprintf("echo A%d", i), shell.ExecOptions{Timeout: 20 * time.Second})
				var busy *shell.BusyError
				switch {
				case err == nil:
					if want := fmt.Sprintf("A%d\n", i); rec.Stdout.String() != want || rec.Command != fmt.Sprintf("echo A%d", i) {
						t.Fatalf("round %d: agent got %q for %q, want %q", i, rec.Stdout.String(), rec.Command, want)
					}
				case errors.As(err, &busy):
				default:
					t.Fatalf("round %d: %v", i, err)
				}
				if err := <-typist; err != nil {
					t.Fatal(err)
				}
				typed++
				users := h.users(t, typed)
				u := users[typed-1]
				if want := fmt.Sprintf("echo H%d", i); u.Command != want || strings.TrimSpace(u.Stdout.String()) != fmt.Sprintf("H%d", i) {
					t.Fatalf("round %d: human record %q with output %q, want %q", i, u.Command, u.Stdout.String(), want)
				}
				h.idle(t)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, a := range h.agent {
				if !regexp.MustCompile(`^A\d+\n$`).MatchString(a.Stdout.String()) && a.Command != "true" {
					t.Errorf("agent record %q has output %q", a.Command, a.Stdout.String())
				}
			}
		})
	}
}

// TestPasswordNotRecorded: keystrokes typed while the terminal hides them
// (a password prompt) are not passed to the recording; ordinary typing is
// (issue 6 item 10).
func TestPasswordNotRecorded(t *testing.T) {
	var typed bytes.Buffer
	h := &harness{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sh, err := shell.Start(ctx, &local.Options{NoSandbox: true, Workspace: t.TempDir()}, &shell.Options{
		OnCommand: func(r shell.Record) {
			h.mu.Lock()
			if r.Source == "user" {
				h.user = append(h.user, r)
			}
			h.mu.Unlock()
		},
		Output: func(p []byte) { h.mu.Lock(); h.screen.Write(p); h.mu.Unlock() },
		Input:  func(p []byte) { h.mu.Lock(); typed.Write(p); h.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	h.sh = sh
	if err := sh.Input(ctx, []byte("read -s -p 'Password: ' pw; echo got-${#pw}\r")); err != nil {
		t.Fatal(err)
	}
	h.waitScreen(t, "\rPassword: ")
	if err := sh.Input(ctx, []byte("hunter2\r")); err != nil {
		t.Fatal(err)
	}
	if got := h.users(t, 1); !strings.Contains(got[0].Stdout.String(), "got-7") {
		t.Fatalf("password prompt: %q", got[0].Stdout.String())
	}
	h.mu.Lock()
	rec := typed.String()
	h.mu.Unlock()
	if strings.Contains(rec, "hunter2") || !strings.Contains(rec, "read -s") {
		t.Fatalf("recorded input %q: want the command, not the password", rec)
	}
}

// TestHumanExitIsReported: a human typing exit ends the shell the same way.
func TestHumanExitIsReported(t *testing.T) {
	h := start(t, &local.Options{NoSandbox: true, Workspace: t.TempDir()})
	if err := h.sh.Input(context.Background(), []byte("exit 4\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.sh.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the shell did not end")
	}
	var exit *shell.ExitError
	if err := h.sh.Err(); !errors.As(err, &exit) || exit.Status != 4 {
		t.Fatalf("Err = %v, want a shell exit with status 4", err)
	}
}

// TestPromptCommandProgramsDoNotStall: a PROMPT_COMMAND that runs programs
// holds the terminal while tandem reads the end marks; the commands still
// end, with their own status.
func TestPromptCommandProgramsDoNotStall(t *testing.T) {
	h := start(t, &local.Options{NoSandbox: true, Workspace: t.TempDir()})
	h.exec(t, `PROMPT_COMMAND+=('sleep 0.02; /bin/true')`)
	for i := range 20 {
		rec := h.exec(t, fmt.Sprintf("echo %d; (exit %d)", i, i%3))
		if rec.Stdout.String() != fmt.Sprintf("%d\n", i) || rec.ExitCode != i%3 {
			t.Fatalf("round %d: %q exit %d", i, rec.Stdout.String(), rec.ExitCode)
		}
	}
}

// TestSlowViewersCostNoMemory: viewers that stop reading cost no memory
// per byte of output: they share one bounded ring, and one that fell behind
// skips ahead to a fresh snapshot; every viewer ends up current (issue 6
// item 17).
func TestSlowViewersCostNoMemory(t *testing.T) {
	ctx := context.Background()
	sh, err := shell.Start(ctx, &ptyDialer{t: t}, &shell.Options{
		Spool: &spool.Dir{Path: t.TempDir(), Inline: 64 << 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	if _, err := sh.Exec(ctx, "true", shell.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	const viewers = 101 // 100 stalled, one reading
	block := make(chan struct{})
	tails := make([]*tailBuf, viewers)
	results := make(chan error, viewers)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range viewers {
		tails[i] = &tailBuf{}
		stalled := i > 0
		go func() {
			results <- sh.Watch(wctx, func(p []byte) error {
				if stalled {
					<-block
				}
				tails[i].write(p)
				return nil
			})
		}()
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rec, err := sh.Exec(ctx, "head -c 20000000 /dev/zero | tr '\\0' x", shell.ExecOptions{Timeout: time.Minute})
	if err != nil || rec.Stdout.Size() != 20000000 {
		t.Fatalf("output: %v %d", err, rec.Stdout.Size())
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 40<<20 {
		t.Errorf("heap grew by %d MB with %d stalled viewers", grew>>20, viewers-1)
	}
	close(block)
	// A viewer that skipped ahead starts at a line boundary of the
	// scrollback: the marker gets a line of its own.
	if _, err := sh.Exec(ctx, "echo; echo END-OF-TEST", shell.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, tb := range tails {
		for !strings.Contains(tb.String(), "END-OF-TEST") {
			if time.Now().After(deadline) {
				t.Fatalf("viewer %d never caught up (%d bytes, %d calls); its tail: %q", i, tb.total, tb.calls, tb.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop()
	for range viewers {
		if err := <-results; err != nil {
			t.Errorf("a viewer ended with %v", err)
		}
	}
}

// tailBuf keeps the last bytes a viewer received.
type tailBuf struct {
	mu           sync.Mutex
	b            []byte
	total, calls int
}

func (t *tailBuf) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	t.total += len(p)
	t.calls++
	if len(t.b) > 8<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
}

func (t *tailBuf) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// TestStagingBoundedByCallTimeout: when the shell does not take the line,
// the call gives up within its own timeout, not the 5 s staging bound
// (issue 6 item 19).
func TestStagingBoundedByCallTimeout(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	// The agent rebinds the stage key: the shell will not ask for the line.
	h.exec(t, `bind -x '"\e[9001~": sleep 8'`)
	start := time.Now()
	_, err := h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: time.Second})
	if err == nil {
		t.Fatal("the line ran although the stage key was rebound")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("gave up after %v with a 1 s timeout", took)
	}
}

// TestViewersSeeLineBeforeOutput: viewers see the agent's command line,
// then its output, never the output glued to the line.
func TestViewersSeeLineBeforeOutput(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	for i := range 30 {
		mark := fmt.Sprintf("ORDER-%d", i)
		h.exec(t, "echo "+mark)
		h.mu.Lock()
		screen := h.screen.String()
		h.mu.Unlock()
		line := strings.Index(screen, "echo "+mark+"\n")
		out := strings.LastIndex(screen, mark+"\r\n")
		if line < 0 || out < line {
			t.Fatalf("round %d: the screen shows the output before the line: %q", i, screen[max(0, len(screen)-300):])
		}
	}
}

// TestStageKeyNeverEchoed: back-to-back agent commands never press the
// stage key before readline is back (the terminal would echo "^[[9001~").
func TestStageKeyNeverEchoed(t *testing.T) {
	h := start(t, &ptyDialer{t: t})
	for i := range 50 {
		h.exec(t, fmt.Sprintf("echo %d", i))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Contains(h.screen.String(), "[9001~") {
		t.Fatalf("the stage key was echoed: %q", h.screen.String()[:min(h.screen.Len(), 600)])
	}
}

// TestShellExitKeepsAllOutput: when a command prints a lot and ends the
// shell, its whole output is captured, even though whoever owns the shell
// closes it the moment it ends (as the session manager does): what is
// still in the relay is read before the relay is closed.
func TestShellExitKeepsAllOutput(t *testing.T) {
	want := 0
	for i := 1; i <= 50000; i++ {
		want += len(strconv.Itoa(i)) + 1
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for round := 0; round < 8; round++ {
				h := start(t, dial(t))
				go func() { <-h.sh.Done(); _ = h.sh.Close() }()
				rec, err := h.sh.Exec(context.Background(), "seq 1 50000; exit 4", shell.ExecOptions{Timeout: 20 * time.Second})
				if !errors.Is(err, shell.ErrShellExited) {
					t.Fatalf("round %d: err = %v, want a shell exit", round, err)
				}
				if rec.Stdout == nil || rec.Stdout.Size() != int64(want) {
					t.Fatalf("round %d: captured %d bytes of %d", round, rec.Stdout.Size(), want)
				}
			}
		})
	}
}
