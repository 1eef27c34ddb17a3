package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// binary is the tandem binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ArgName {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == noopServerArg {
		os.Exit(noopServerMain(os.Args[2:]))
	}
	dir, err := os.MkdirTemp("", "tandem-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tandem")
	args := []string{"build", "-o", binary}
	if os.Getenv("TANDEM_TEST_RACE") != "" {
		// The servers the tests start run under the race detector, and
		// stop at the first race (set GORACE=halt_on_error=1).
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testenv.PostgresMain(m) // stops the throwaway PostgreSQL, if a test started it
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// tandemProc is one `tandem serve` process and its MCP client.
type tandemProc struct {
	client  *sdk.Client
	cs      *sdk.ClientSession
	cmd     *exec.Cmd
	home    string
	dataDir string
	stderr  *os.File
}

type serverOpts struct {
	dir      string // working directory (the default local workspace)
	home     string // HOME, and the data dir under it; shared to simulate a restart
	logLevel string // default debug, for failure logs
	config   string // tandem.yaml content, if any; "workspace: ws" names an empty directory beside it
	env      []string
	// fileSizeKB, if set, caps every file tandem writes (RLIMIT_FSIZE):
	// writes past it fail as they would on a full disk.
	fileSizeKB int
	// extraFiles are handed to tandem as fds 3, 4, ... (a leaky client).
	extraFiles []*os.File
	// args are more flags for tandem serve.
	args []string
	// progress, if set, receives the client's progress notifications.
	progress func(*sdk.ProgressNotificationClientRequest)
	// roots are the client's MCP roots (directories) at connect.
	roots []string
	// elicit, if set, answers the server's elicitations (the client
	// declares the capability).
	elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
	// wire, if set, gets every JSON-RPC message of the client's
	// connection, a line each: "read: " what tandem sent (replies,
	// notifications, requests), "write: " what the client sent.
	wire io.Writer
}

// startServer spawns the built binary over stdio, the way MCP clients do.
func startServer(t testing.TB, o serverOpts) *tandemProc {
	t.Helper()
	home := o.home
	if home == "" {
		home = t.TempDir()
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	s := &tandemProc{home: home, dataDir: filepath.Join(home, "state")}
	if o.logLevel == "" {
		o.logLevel = "debug"
	}
	args := append([]string{"serve", "--web", "127.0.0.1:0", "--data-dir", s.dataDir, "--log-level", o.logLevel}, o.args...)
	if o.config != "" {
		cdir := t.TempDir()
		p := filepath.Join(cdir, "tandem.yaml")
		if err := os.WriteFile(p, []byte(o.config), 0o600); err != nil {
			t.Fatal(err)
		}
		// A workspace beside the file, not around it: tandem refuses a
		// config that its sessions could rewrite.
		if err := os.Mkdir(filepath.Join(cdir, "ws"), 0o700); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	cmd := exec.Command(binary, args...)
	if o.fileSizeKB > 0 {
		// sh execs tandem in place, so the pid and stdio stay tandem's.
		cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -f %d && exec "$0" "$@"`, o.fileSizeKB), binary}, args...)...)
	}
	cmd.Dir = o.dir
	cmd.ExtraFiles = o.extraFiles
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "USER=" + os.Getenv("USER")}, o.env...)
	errf, err := os.CreateTemp(home, "stderr-*.log")
	if err != nil {
		t.Fatal(err)
	}
	s.stderr = errf
	cmd.Stderr = errf
	copts := &sdk.ClientOptions{ElicitationHandler: o.elicit}
	if o.progress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { o.progress(r) }
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, copts)
	for _, r := range o.roots {
		//lint:ignore SA1019 the roots test needs a client with roots (deprecated by SEP-2577, still served).
		client.AddRoots(&sdk.Root{URI: "file://" + r})
	}
	s.client = client
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tr sdk.Transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second}
	if o.wire != nil {
		tr = &sdk.LoggingTransport{Transport: tr, Writer: o.wire}
	}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect to tandem: %v (stderr: %s)", err, s.log())
	}
	s.cs, s.cmd = cs, cmd
	t.Cleanup(func() {
		_ = cs.Close()
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		_ = errf.Close()
		if t.Failed() {
			t.Logf("tandem stderr:\n%s", lastN(s.log(), 4000))
		}
	})
	return s
}

// waitExit returns once tandem has exited, failing t after timeout. The
// SDK's transport owns cmd.Wait, so this watches the process instead.
func (s *tandemProc) waitExit(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	// The main thread turns zombie before the others have exited and
	// closed the process's files (its instance lock among them): wait for
	// every thread.
	for testenv.Running(s.cmd.Process.Pid) || threadsLeft(s.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("tandem (pid %d) still running after %v", s.cmd.Process.Pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *tandemProc) log() string {
	b, _ := os.ReadFile(s.stderr.Name())
	return string(b)
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call invokes a tool over the real stdio connection and checks the reply.
func (s *tandemProc) call(t testing.TB, tool string, args any) map[string]any {
	t.Helper()
	return (&mcptest.Client{CS: s.cs}).Call(t, tool, args)
}

var (
	mustOK    = mcptest.MustOK
	wantError = mcptest.WantError
	result    = mcptest.Result
	str       = mcptest.Str
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// threadsLeft reports whether any thread of pid is neither gone nor a
// zombie.
func threadsLeft(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if state := b[i+2]; state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}
