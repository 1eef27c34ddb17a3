package recording_test

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestAsciinemaPlays plays a recording with the real asciinema, the player
// the design promises compatibility with.
//
// "asciinema cat" insists on opening /dev/tty, so the test uses "asciinema
// play", which falls back to plain output without a terminal. It runs in a
// new session so that it has none even when the tests run in a terminal.
func TestAsciinemaPlays(t *testing.T) {
	bin, err := exec.LookPath("asciinema")
	if err != nil {
		testenv.Missing(t, "asciinema: %v: install it (apt-get install asciinema)", err)
	}
	path, w := createCast(t, recording.Header{Width: 80, Height: 24, Title: "asciinema"})
	for i, c := range chunks {
		w.Output([]byte(c))
		if i == 2 {
			w.Input([]byte("ls\r"))
			w.Resize(100, 40)
			w.Marker("human: ls") // tandem marks each command's start
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), bin, "play", "--speed", "1000", "--idle-time-limit", "0.01", path)
	cmd.Env = []string{"ASCIINEMA_CONFIG_HOME=" + t.TempDir(), "LANG=C.UTF-8", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("asciinema play: %v\n%s", err, stderr.String())
	}
	if got, want := stdout.String(), valid(strings.Join(chunks, "")); got != want {
		t.Errorf("asciinema played\n %q\nwant %q", got, want)
	}
}
