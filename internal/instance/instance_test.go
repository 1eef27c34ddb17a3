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

// TestLiveListsWhatEachSaid: Live names the live instances with what each
// described, skips a released one, and keeps the description 0600.
func TestLiveListsWhatEachSaid(t *testing.T) {
	dir := t.TempDir()
	if got, err := instance.Live(dir); err != nil || len(got) != 0 {
		t.Fatalf("a data dir no tandem used: %v %v", got, err)
	}
	a, err := instance.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Release() })
	b, err := instance.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Release() })
	if err := a.Describe([]byte(`{"web":"http://127.0.0.1:7777/and a longer text first"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Describe([]byte(`{"web":"http://127.0.0.1:7777"}`)); err != nil { // shorter: no tail left over
		t.Fatal(err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	got, err := instance.Live(dir)
	if err != nil || len(got) != 1 || got[0].ID != a.ID || string(got[0].Info) != `{"web":"http://127.0.0.1:7777"}` {
		t.Fatalf("Live = %+v, %v; want only %s with its description", got, err, a.ID)
	}
	if fi, err := os.Stat(got[0].File); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the description's file: %v %v, want mode 0600", fi.Mode(), err)
	}
	if err := b.Describe(nil); err == nil {
		t.Error("a released instance described itself")
	}
}
