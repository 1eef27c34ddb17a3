package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestIntegratedShell runs tandem's shell engine (integration rc on an
// inherited fd, nonce over the tty, FIFO relay) on this backend, sandboxed.
func TestIntegratedShell(t *testing.T) {
	o := sandboxed(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	sh, err := shell.Start(ctx, o, nil)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	ws, err := filepath.EvalSymlinks(o.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(cmd string) shell.Record {
		t.Helper()
		rec, err := sh.Exec(t.Context(), cmd, shell.ExecOptions{Timeout: waitFor})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return rec
	}

	rec := exec(`printf 'out\000\377'; printf err >&2; mkdir -p sub && cd sub; exit_code() { return 4; }; exit_code`)
	if rec.Stdout.String() != "out\x00\xff" || rec.Stderr.String() != "err" || rec.ExitCode != 4 {
		t.Errorf("record = stdout %q, stderr %q, exit %d", rec.Stdout, rec.Stderr, rec.ExitCode)
	}
	if want := filepath.Join(ws, "sub"); rec.Cwd != want {
		t.Errorf("cwd = %q, want %q", rec.Cwd, want)
	}

	outside, err := os.MkdirTemp("/", "tandem-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	rec = exec("ls " + outside)
	if !strings.Contains(rec.Stderr.String(), "Permission denied") || rec.ExitCode == 0 {
		t.Errorf("reading outside: stderr %q, exit %d; want a denial", rec.Stderr, rec.ExitCode)
	}

	// Cancel goes Ctrl-C, then SignalForeground; sleep dies at the first.
	done := make(chan error, 1)
	go func() {
		_, err := sh.Exec(t.Context(), "sleep 100", shell.ExecOptions{Timeout: 200 * time.Millisecond})
		done <- err
	}()
	<-done // times out: the command keeps running
	rec, err = sh.Cancel(t.Context(), time.Second)
	if err != nil || rec.ExitCode != 130 {
		t.Fatalf("cancel: exit %d, %v", rec.ExitCode, err)
	}
}
