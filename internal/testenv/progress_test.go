package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProgressNamesAHungTest runs a fixture whose test never ends under a
// short -timeout, through .ci/progress as `make test` does: the output must
// name the unfinished test and carry its stack, and the run must fail.
func TestProgressNamesAHungTest(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		Missing(t, "python3 runs .ci/progress: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	test := exec.Command(goBin, "test", "-count=1", "-json", "-timeout", "3s", "./internal/testenv/testdata/hang")
	test.Dir = root
	test.Env = append(os.Environ(), "TANDEM_HANG_FIXTURE=1")
	progress := exec.Command(python, filepath.Join(root, ".ci", "progress"))
	progress.Stdin, err = test.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// go test's own stderr in a buffer of its own: two commands writing
	// to one buffer race (exec serialises only one command's two streams).
	var out, goErr bytes.Buffer
	progress.Stdout, progress.Stderr = &out, &out
	test.Stderr = &goErr
	if err := progress.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { progress.Process.Kill(); progress.Wait() })
	if err := test.Run(); err == nil {
		t.Fatalf("go test of the hanging fixture succeeded:\n%s%s", out.String(), goErr.String())
	}
	if err := progress.Wait(); err == nil {
		t.Errorf(".ci/progress exited 0 for a run that timed out:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"built internal/testenv/testdata/hang, testing",
		"pass internal/testenv/testdata/hang TestEnds",
		"panic: test timed out after 3s",
		"testdata/hang/hang_test.go:", // the stack names the line it waits on
		"unfinished internal/testenv/testdata/hang TestNeverEnds/waiting",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress output lacks %q:\n%s", want, got)
		}
	}
}
