package sandbox

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestNetworkPolicyRejects: the network fields must make sense together.
func TestNetworkPolicyRejects(t *testing.T) {
	for name, p := range map[string]Policy{
		"namespace with network on":   {Network: true, Namespace: true},
		"filter with network on":      {Network: true, NetFilter: true},
		"namespace and filter":        {Namespace: true, NetFilter: true},
		"proxy without a namespace":   {ProxyPort: 3128, ProxyFD: 3},
		"proxy without a port":        {Namespace: true, ProxyFD: 3},
		"proxy on a standard stream":  {Namespace: true, ProxyPort: 3128, ProxyFD: 2},
		"proxy on the exec socket":    {Namespace: true, ProxyPort: 3128, ProxyFD: 3, ExecFD: 3},
		"sockets without a namespace": {SocketFD: 3},
		"sockets on the proxy socket": {Namespace: true, ProxyPort: 3128, ProxyFD: 3, SocketFD: 3},
	} {
		if _, err := Command(self, p, []string{"true"}); err == nil {
			t.Errorf("%s: Command accepted %+v", name, p)
		}
	}
}

// TestNetFilterAssembles: the fallback filter's program assembles for
// every architecture it is built for.
func TestNetFilterAssembles(t *testing.T) {
	a, ok := netFilterArchs()
	if !ok {
		t.Fatalf("the network filter is not built for this architecture")
	}
	prog, err := netProgram(a, false)
	if err != nil || len(prog) == 0 || len(prog) > 4096 {
		t.Fatalf("%d instructions, %v", len(prog), err)
	}
}

// TestMainNamespace: in a namespace of its own the program sees only a
// loopback that is up, reaches none of the host's listeners, and the
// proxy's listener it was asked for comes back to the caller, who alone
// can serve the program through it.
func TestMainNamespace(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if err := ProbeNamespace(context.Background(), self); err != nil {
		t.Fatalf("this host (root, or unprivileged user namespaces) must allow network namespaces: %v", err)
	}
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	hostPort := host.Addr().(*net.TCPAddr).Port

	parent, child, err := ProxyPair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Close(); child.Close() })
	const proxyPort = 23456
	p := Policy{ReadWrite: []string{t.TempDir()}, ReadOnly: DefaultReadOnly(), Namespace: true,
		ProxyPort: proxyPort, ProxyFD: 3, ConnectPorts: []uint16{proxyPort, uint16(hostPort)}}
	// /proc/net is the reader's namespace (sysfs shows the mounter's).
	script := "echo interfaces $(awk 'NR>2{print $1}' /proc/net/dev); " +
		"bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + itoa(hostPort) + "' || echo host-unreachable; " +
		"bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + itoa(proxyPort) + " && head -c 5 <&3'"
	cmd, err := Command(self, p, []string{"sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{child}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := ReceiveProxy(ctx, parent)
	if err != nil {
		_ = cmd.Wait()
		t.Fatalf("%v; launcher said %s", err, out)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.WriteString(c, "proxy")
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"interfaces lo:\n", "host-unreachable", "proxy"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(proxyPort), time.Second); err == nil {
		c.Close()
		t.Errorf("the namespace's proxy port answers on the host's loopback")
	}
}

// TestMainRefusesTheHostNamespace: a launcher told it has a namespace
// of its own that was not cloned into one refuses to run the program
// rather than bind the proxy's port on the host's loopback.
func TestMainRefusesTheHostNamespace(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	nonLoopback := false
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() {
			nonLoopback = true
		}
	}
	if !nonLoopback {
		t.Skip("this host has loopback addresses only: the launcher cannot tell it from a namespace")
	}
	cmd, err := Command(self, Policy{ReadOnly: DefaultReadOnly(), Namespace: true}, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = nil // as a caller that dropped Command's clone flags
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitRefused || !strings.Contains(string(out), "not in a namespace of its own") {
		t.Fatalf("exit %v, %v: %s", cmd.ProcessState, err, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestMainNamespaceUnprivileged runs TestMainNamespace again as an
// unprivileged user (a copy of this test binary, run as nobody), where the
// launcher needs a user namespace of its own to own its network namespace
// and keeps CAP_NET_ADMIN across its exec only to bring lo up; and
// TestSocketHelperReachesTheSessionsLoopback, where tandem could not join
// that namespace (setns) and reaches its ports through the socket helper.
func TestMainNamespaceUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestMainNamespace is this test")
	}
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	for _, knob := range []string{"/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone"} {
		if b, err := os.ReadFile(knob); err == nil && strings.TrimSpace(string(b)) == "0" {
			testenv.Missing(t, "unprivileged user namespaces are off here (%s is 0)", knob)
		}
	}
	dir := t.TempDir()
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(copyPath, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil || os.Chmod(tmp, 0o777) != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyPath, "-test.run=^(TestMainNamespace|TestSocketHelperReachesTheSessionsLoopback)$", "-test.count=1", "-test.v")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestMainNamespace") || !strings.Contains(string(out), "--- PASS: TestSocketHelperReachesTheSessionsLoopback") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
