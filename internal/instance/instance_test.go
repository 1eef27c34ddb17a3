package instance_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/instance"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("INSTANCE_CHILD_DIR"); dir != "" {
		in, err := instance.Acquire(dir)
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(in.ID + "\n")
		time.Sleep(time.Hour) // until killed
	}
	os.Exit(m.Run())
}

func TestAliveUntilKilled(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INSTANCE_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(buf[:n]))

	self, err := instance.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = self.Release() })
	for _, c := range []struct {
		id   string
		want bool
	}{{id, true}, {self.ID, true}, {"inst_unknown", false}} {
		if got, err := instance.Alive(dir, c.id); err != nil || got != c.want {
			t.Errorf("Alive(%s) = %v, %v; want %v", c.id, got, err, c.want)
		}
	}
	_ = cmd.Process.Signal(os.Kill)
	_ = cmd.Wait()
	if alive, err := instance.Alive(dir, id); alive || err != nil {
		t.Errorf("a SIGKILLed instance is still alive: %v %v", alive, err)
	}
	if err := self.Release(); err != nil {
		t.Fatal(err)
	}
	if alive, _ := instance.Alive(dir, self.ID); alive {
		t.Error("a released instance is still alive")
	}
	if _, err := instance.Alive(dir, "../x"); err == nil {
		t.Error("a path in an id was accepted")
	}
}
