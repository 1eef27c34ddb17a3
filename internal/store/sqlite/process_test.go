package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// childEnv switches the test binary into a child process that works on
// the data dir it names, so a test can run a real second process on the
// same database.
const childEnv = "TANDEM_STORE_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

// child runs in the child process: spec is "MODE DIR N".
func child(spec string) int {
	var (
		mode, dir string
		n         int
	)
	if _, err := fmt.Sscan(spec, &mode, &dir, &n); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	switch mode {
	case "append":
		err = appendChild(ctx, st, n)
	case "fsize":
		err = fileSizeChild(ctx, st, n)
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// appendChild prints "ready", waits for a line on stdin, then appends n
// records as actor "child".
func appendChild(ctx context.Context, st *sqlite.DB, n int) error {
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("child start: %w", err)
	}
	log := audit.New(st)
	for i := range n {
		if _, err := log.Append(ctx, store.AuditRecord{Event: audit.EventToolCall, Actor: "child", Args: []byte(strconv.Itoa(i))}); err != nil {
			return err
		}
	}
	return nil
}

// TestStoreAuditTwoProcesses runs a real second process appending to the
// same data dir while this one appends.
func TestStoreAuditTwoProcesses(t *testing.T) {
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	st := openStore(t, dir)

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=append %s %d", childEnv, dir, n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	mustNil(t, err)
	stdout, err := cmd.StdoutPipe()
	mustNil(t, err)
	mustNil(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v; stderr: %s", line, err, stderr.String())
	}

	// Both start together.
	_, err = stdin.Write([]byte("go\n"))
	mustNil(t, err)
	log := audit.New(st)
	for i := range n {
		if _, err := log.Append(ctx, store.AuditRecord{Event: audit.EventToolCall, Actor: "parent", Args: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v; stderr: %s", err, stderr.String())
	}

	checkAppendedOnce(t, st, 2*n, func(r store.AuditRecord) string { return r.Actor + string(r.Args) })
	switches, last := 0, ""
	mustNil(t, st.ScanAudit(ctx, func(r store.AuditRecord) error {
		if last != "" && r.Actor != last {
			switches++
		}
		last = r.Actor
		return nil
	}))
	t.Logf("%d records from two processes, writer changed %d times along the chain", 2*n, switches)
}
