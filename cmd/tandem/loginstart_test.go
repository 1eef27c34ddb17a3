package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestSSHSlowLogin: a login whose ~/.bashrc is slow (pyenv init) and which
// bash, run by sshd, reads for every channel a client opens. ssh_connect
// says how long the start took (loginStartMs, and why in the message);
// after it, the rc never runs again however the session is used: a
// viewer's Ctrl-C on the agent's running program (it interrupts it, and
// its output stops), command_timeout, ssh_cancel. Before, every look at
// the server's processes started a login, rc and all, and a Ctrl-C waited
// for several.
func TestSSHSlowLogin(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3 not found: %v", err)
	}
	d := testenv.SSHD(t)
	runs := filepath.Join(t.TempDir(), "rc-runs")
	rc := "echo run >>" + strconv.Quote(runs) + "\nsleep 1.2\n"
	if err := os.WriteFile(filepath.Join(d.Home, ".bashrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		b, err := os.ReadFile(runs)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("run\n"))
	}
	srv := startServer(t, serverOpts{})
	r := mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "far", "host": d.Host, "port": d.Port,
		"username": d.User, "keyFilePath": d.ClientKeyFile}))
	if ms, _ := r["loginStartMs"].(float64); ms < 1000 || !strings.Contains(str(r["message"]), "loginStartMs") {
		t.Errorf("a 1.2 s rc: loginStartMs %v, message %q", r["loginStartMs"], r["message"])
	}
	s := sess{srv, "far", str(r["sessionToken"])}
	v := openViewer(t, str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"]), dataDirToken(t, srv.dataDir))
	// The shell's login and the helper's have run their rc once the helper
	// answers; the first Ctrl-C waits for that.
	settled := -1
	for run := range 4 {
		r := s.exec(t, interruptible+strconv.Itoa(run), 0.3)
		if r["error"] != "command_timeout" {
			t.Fatalf("the ticking program: %v", r)
		}
		v.waitFor(t, fmt.Sprintf("tick %d 5 ", run), 1)
		v.paste(t, "\x03")
		out := srv.call(t, "ssh_read_output", map[string]any{"sessionName": s.name, "sessionToken": s.tok,
			"commandId": r["commandId"], "stream": "stderr", "waitSeconds": 20})
		if !strings.HasPrefix(str(out["data"]), "INT ") {
			t.Fatalf("run %d: the viewer's Ctrl-C did not interrupt the program: stderr %v", run, out)
		}
		// Its output stopped: the command ended.
		waitUntil(t, func() bool { return s.exec(t, "true")["success"] == true })
		if run == 0 {
			settled = count()
		}
	}
	if r := s.exec(t, "sleep 30", 0.5); r["error"] != "command_timeout" {
		t.Fatalf("sleep 30: %v", r)
	}
	mustOK(t, srv.call(t, "ssh_cancel", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))
	if n := count(); n != settled {
		t.Fatalf("the login's rc ran %d times after the session settled (%d then %d): questions about the server's processes start logins", n-settled, settled, n)
	}
}
