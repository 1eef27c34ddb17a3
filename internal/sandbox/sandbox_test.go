package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// self is this test binary, re-executed as the sandbox launcher.
var self string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ArgName {
		os.Exit(Main(os.Args[2:]))
	}
	abs, err := filepath.Abs(os.Args[0])
	if err != nil {
		panic(err)
	}
	self = abs
	os.Exit(m.Run())
}

func TestRequirement(t *testing.T) {
	tests := []struct {
		abi     int
		network bool
		ok      bool
	}{
		{abi: 0, network: true, ok: false},
		{abi: 0, network: false, ok: false},
		{abi: 1, network: true, ok: true},
		{abi: 3, network: true, ok: true},
		{abi: 3, network: false, ok: false},
		{abi: 4, network: false, ok: true},
		{abi: 7, network: false, ok: true},
		{abi: 99, network: false, ok: true},
	}
	for _, tt := range tests {
		err := requirement(tt.abi, Policy{Network: tt.network})
		if tt.ok != (err == nil) {
			t.Errorf("requirement(abi %d, network %v) = %v, want ok=%v", tt.abi, tt.network, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("requirement(abi %d, network %v) = %v, want it to wrap ErrUnsupported", tt.abi, tt.network, err)
		}
	}
}

func TestSupportedOnThisKernel(t *testing.T) {
	if abi := kernelABI(); abi < minNetABI {
		testenv.Missing(t, "kernel Landlock ABI %d < %d", abi, minNetABI)
	}
	if err := (Policy{}).Supported(); err != nil {
		t.Fatalf("Supported() = %v on a kernel with ABI %d", err, kernelABI())
	}
}

func TestCommandRejects(t *testing.T) {
	tests := []struct {
		name string
		self string
		p    Policy
		argv []string
	}{
		{"relative launcher", "tandem", Policy{}, []string{"true"}},
		{"no program", self, Policy{}, nil},
		{"relative read-write path", self, Policy{ReadWrite: []string{"work"}}, []string{"true"}},
		{"relative read-only path", self, Policy{ReadOnly: []string{"usr"}}, []string{"true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Command(tt.self, tt.p, tt.argv); err == nil {
				t.Fatal("Command succeeded, want an error")
			}
		})
	}
}

func TestCommandRoundTrip(t *testing.T) {
	want := Policy{ReadWrite: []string{"/w"}, ReadOnly: []string{"/usr"}, Network: true}
	cmd, err := Command(self, want, []string{"sh", "-c", "true"})
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Args[1] != ArgName {
		t.Fatalf("args = %q, want %q first", cmd.Args, ArgName)
	}
	got, argv, err := parseArgs(cmd.Args[2:])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.ReadWrite, want.ReadWrite) || !slices.Equal(got.ReadOnly, want.ReadOnly) || got.Network != want.Network {
		t.Errorf("policy = %+v, want %+v", got, want)
	}
	if !slices.Equal(argv, []string{"sh", "-c", "true"}) {
		t.Errorf("argv = %q", argv)
	}
}

// TestMainRefusesBadArguments runs Main in-process: every case fails
// before any restriction is applied.
func TestMainRefusesBadArguments(t *testing.T) {
	tests := [][]string{
		nil,
		{`{}`, "true"},
		{`{}`, "--"},
		{`not json`, "--", "true"},
		{`{"rw":["/"],"bogus":1}`, "--", "true"},
		{`{"ro":["relative"]}`, "--", "true"},
	}
	for _, args := range tests {
		if code := Main(args); code != exitRefused {
			t.Errorf("Main(%q) = %d, want %d", args, code, exitRefused)
		}
	}
}

// run starts sh -c script under p through the launcher and returns its
// combined output and exit code.
func run(t *testing.T, p Policy, script string) (string, int) {
	t.Helper()
	cmd, err := Command(self, p, []string{"sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %q: %v", script, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestMainConfines(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	work := t.TempDir()
	outside, err := os.MkdirTemp("/", "tandem-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := Policy{ReadWrite: []string{work}, ReadOnly: DefaultReadOnly()}

	tests := []struct {
		name   string
		script string
		code   int
		want   string
	}{
		{"read outside denied", "cat " + secret, 1, "Permission denied"},
		{"write workspace", "echo hi > " + work + "/f && cat " + work + "/f", 0, "hi"},
		{"write etc denied", "touch /etc/tandem-sandbox-probe", 1, "Permission denied"},
		{"devices", "echo x > /dev/null && head -c 4 /dev/zero | wc -c", 0, "4"},
		{"capabilities dropped", "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status | tr -d '\\t' | tr '\\n' ' '", 0,
			"CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 CapAmb:0000000000000000"},
		{"exit code passes through", "exit 7", 7, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, p, tt.script)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output %q; want exit %d and output containing %q", code, out, tt.code, tt.want)
			}
		})
	}
	if _, err := os.Stat("/etc/tandem-sandbox-probe"); err == nil {
		os.Remove("/etc/tandem-sandbox-probe")
		t.Error("sandboxed touch created /etc/tandem-sandbox-probe")
	}
}

// TestMainClosesInheritedFiles checks that a descriptor the launcher
// inherited (a file, a socket) does not reach the program: it would be a
// way around the policy (issue 6 item 2).
func TestMainClosesInheritedFiles(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd, err := Command(self, Policy{ReadOnly: DefaultReadOnly()}, []string{"sh", "-c", "cat <&3 && echo leaked; ls /proc/self/fd"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{r}
	if _, err := w.WriteString("rc text\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	out, err := cmd.Output()
	if err != nil || strings.Contains(string(out), "leaked") || strings.Contains(string(out), "rc text") {
		t.Fatalf("the inherited descriptor reached the program: %q, %v", out, err)
	}
	// sh's own fds: 0-2 and the one ls lists /proc/self/fd with.
	if fds := strings.Fields(string(out)); len(fds) > 4 {
		t.Fatalf("open descriptors in the sandbox: %v", fds)
	}
}

func TestMainProgramNotFound(t *testing.T) {
	cmd, err := Command(self, Policy{}, []string{"tandem-no-such-program"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitNotFound {
		t.Fatalf("exit %d (%q), want %d", code, out, exitNotFound)
	}
}

// TestCommandRejectsStandardExecFD: the exec-judging socket can never be
// one of the program's standard streams.
func TestCommandRejectsStandardExecFD(t *testing.T) {
	for _, fd := range []int{-1, 1, 2} {
		if _, err := Command(self, Policy{ExecFD: fd}, []string{"true"}); err == nil {
			t.Errorf("Command accepted ExecFD %d", fd)
		}
	}
}

// TestMainConnectPorts: with ConnectPorts, the program may connect to
// those TCP ports and no other.
func TestMainConnectPorts(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	listen := func() (net.Listener, uint16) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
	}
	_, allowed := listen()
	_, other := listen()
	p := Policy{ReadWrite: []string{t.TempDir()}, ReadOnly: DefaultReadOnly(), ConnectPorts: []uint16{allowed}}
	probe := func(port uint16) string {
		return fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'", port)
	}
	tests := []struct {
		name   string
		script string
		code   int
		want   string
	}{
		{"the listed port", probe(allowed), 0, "connected"},
		{"another port", probe(other), 1, "Permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, p, tt.script)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output %q; want exit %d and output containing %q", code, out, tt.code, tt.want)
			}
		})
	}
}
