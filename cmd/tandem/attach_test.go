package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/web"
)

// attached is one `tandem attach` process with its input and output.
type attached struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	mu  sync.Mutex
	out bytes.Buffer
}

func (a *attached) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.Write(p)
}

func (a *attached) screen() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

func startAttach(t *testing.T, args ...string) *attached {
	t.Helper()
	a := &attached{}
	a.cmd = exec.Command(binary, append([]string{"attach"}, args...)...)
	a.cmd.Stdout, a.cmd.Stderr = a, a
	in, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.in = in
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Kill(); _ = a.cmd.Wait() })
	return a
}

// waitScreenText waits until the attached terminal shows text.
func (a *attached) waitScreenText(t *testing.T, text string) {
	t.Helper()
	if !waitFor(15*time.Second, func() bool { return strings.Contains(a.screen(), text) }) {
		t.Fatalf("tandem attach never showed %q; it shows:\n%s", text, a.screen())
	}
}

// TestAttach: keys typed through `tandem attach` are the human's, so the
// agent's next call is told; --observe shows the session and types
// nothing; an operator attaches by session id.
func TestAttach(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "att"}))["sessionToken"])
	s := sess{srv, "att", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "att", "sessionToken": tok}))["monitoringUrl"])

	// Observe: what the agent runs shows up; what is typed goes nowhere.
	obs := startAttach(t, "--observe", url)
	obs.waitScreenText(t, "@") // the prompt, user@host: joined
	if _, err := io.WriteString(obs.in, "echo typed-by-observer\r"); err != nil {
		t.Fatal(err)
	}
	if r := result(t, s.exec(t, "echo seen-by-observer")); r["stdout"] != "seen-by-observer\n" {
		t.Fatalf("agent call beside an observer: %v", r)
	}
	obs.waitScreenText(t, "seen-by-observer")
	if strings.Contains(obs.screen(), "typed-by-observer") {
		t.Error("--observe typed into the session")
	}

	// Attach and type, with the operator token of the data dir whose
	// dashboard serves the URL: the agent's next call sees the human's command.
	att := startAttach(t, "--data-dir", srv.dataDir, url)
	att.waitScreenText(t, "seen-by-observer") // the scrollback
	if _, err := io.WriteString(att.in, "echo from-attach\r"); err != nil {
		t.Fatal(err)
	}
	att.waitScreenText(t, "from-attach\r\n")
	var gate map[string]any
	if !waitFor(15*time.Second, func() bool {
		r := s.exec(t, "pwd")
		if r["error"] == "session_busy" {
			return false // the human's command is still ending
		}
		gate = r
		return true
	}) {
		t.Fatal("the session stayed busy after the human's command")
	}
	g := wantError(t, gate, "user_activity_detected")
	cmds, _ := g["userCommands"].([]any)
	if len(cmds) != 1 || !strings.Contains(str(cmds[0].(map[string]any)["command"]), "echo from-attach") {
		t.Fatalf("userCommands: %v", g["userCommands"])
	}
	_ = att.in.Close() // end of input: detach
	if err := att.cmd.Wait(); err != nil {
		t.Errorf("attach after its input ended: %v\n%s", err, att.screen())
	}

	// The operator, by session id through the data dir's token.
	rows := newOperatorClient(t, srv).do(t, "GET", "/api/state", "")["sessions"].([]any)
	id := str(rows[0].(map[string]any)["id"])
	byID := startAttach(t, "--observe", "--data-dir", srv.dataDir, id)
	byID.waitScreenText(t, "from-attach")
	// And by the session's name, as the agent and the dashboard call it.
	byName := startAttach(t, "--observe", "--data-dir", srv.dataDir, "att")
	byName.waitScreenText(t, "from-attach")
	if out, err := tandemCLI(t, "attach", "--observe", "--data-dir", srv.dataDir, "no-such-session"); err == nil ||
		!strings.Contains(out, `no live session has the id or name "no-such-session"`) {
		t.Errorf("attach to an unknown name: %v %q", err, out)
	}
}

// TestAttachTokenNotToAnExitedTandem: once a tandem has exited, whatever
// listens on its old port (a session's leftover process, say) is not its
// dashboard: attach sends it no operator token.
func TestAttachTokenNotToAnExitedTandem(t *testing.T) {
	srv := startServer(t, serverOpts{})
	u, err := url.Parse(dashboardLink(t, srv.dataDir))
	if err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Process.Kill()
	srv.waitExit(t, 10*time.Second)
	ln, err := net.Listen("tcp", u.Host) // the squatter takes the port
	if err != nil {
		t.Fatalf("the exited tandem's port: %v", err)
	}
	got := make(chan http.Header, 1)
	rogue := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		http.NotFound(w, r)
	})}
	go func() { _ = rogue.Serve(ln) }()
	t.Cleanup(func() { _ = rogue.Close() })

	att := startAttach(t, "--data-dir", srv.dataDir, "http://"+u.Host+"/s/k-looks-like-a-session")
	_ = att.cmd.Wait()
	select {
	case h := <-got:
		if a := h.Get("Authorization"); a != "" {
			t.Fatalf("attach sent %q to the port of a tandem that has exited", a)
		}
	default:
		t.Fatalf("attach never reached the listener:\n%s", att.screen())
	}
}

// tmuxPane is a detached tmux session of its own: a server on a private
// socket, no config, one pane running a command.
type tmuxPane struct{ sock string }

func startTmux(t *testing.T, argv ...string) tmuxPane {
	t.Helper()
	p := tmuxPane{filepath.Join(t.TempDir(), "tmux.sock")}
	if out, err := p.run(append([]string{"new-session", "-d", "-x", "120", "-y", "40", "--"}, argv...)...); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = p.run("kill-server") })
	return p
}

func (p tmuxPane) run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", p.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	return string(out), err
}

// screen is what the pane shows, with its scrollback.
func (p tmuxPane) screen() string {
	out, _ := p.run("capture-pane", "-p", "-J", "-S", "-200")
	return out
}

// waitScreen waits until the pane shows text.
func (p tmuxPane) waitScreen(t *testing.T, text string) {
	t.Helper()
	if !waitFor(15*time.Second, func() bool { return strings.Contains(p.screen(), text) }) {
		t.Fatalf("the tmux pane never showed %q; it shows:\n%s", text, p.screen())
	}
}

// TestAttachUnderTmux: the agent prints terminal queries (DSR, DA, DA2,
// XTVERSION, a colour query, DECRQM, DECRQSS) to an operator attached from
// tmux, which answers every one of them it sees. None reaches tmux, so no
// answer reaches the shell: a read of the session's terminal right after
// them gets nothing, no human command is recorded, and the next call runs.
// The operator's own keys still go through.
func TestAttachUnderTmux(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "tm"}))["sessionToken"])
	s := sess{srv, "tm", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "tm", "sessionToken": tok}))["monitoringUrl"])

	pane := startTmux(t, binary, "attach", "--data-dir", srv.dataDir, url)
	pane.waitScreen(t, "attached; Ctrl-] detaches")
	pane.waitScreen(t, "@") // the prompt

	// The shell's own read of its terminal: what arrives within 2 s of the
	// queries. Without the filters, tmux's answers arrive here at once.
	// The read waits for keys: the call answers so (waitingForInput), and
	// the command ends on its own after 2 s.
	r := wantError(t, s.exec(t, `printf '\033[6n\033[c\033[>c\033[>q\033]11;?\a\033[?2004$p\033P$qm\033\\'; `+
		`IFS= read -rs -t 2 -d '' got; printf 'answers:[%q]\n' "$got"`), "command_timeout")
	if r["waitingForInput"] != true {
		t.Fatalf("the read of the terminal: %v", r)
	}
	waitCommand(t, s, str(r["commandId"]))
	r = mustOK(t, srv.call(t, "ssh_read_output", map[string]any{"sessionName": "tm", "sessionToken": tok, "commandId": r["commandId"]}))
	if out := str(r["data"]); !strings.Contains(out, "answers:['']") {
		t.Fatalf("the shell's terminal got answers: %q", out)
	}
	pane.waitScreen(t, "answers:")
	// Nothing was typed: no human command, and the session runs the next call.
	if r := result(t, s.exec(t, "echo still-usable")); r["stdout"] != "still-usable\n" {
		t.Fatalf("after the queries: %v", r)
	}

	// The operator types in the tmux pane: that is the human's command.
	if out, err := pane.run("send-keys", "-l", "echo typed-in-tmux\r"); err != nil {
		t.Fatalf("send-keys: %v %s", err, out)
	}
	pane.waitScreen(t, "typed-in-tmux\n")
	var gate map[string]any
	if !waitFor(15*time.Second, func() bool {
		gate = s.exec(t, "true")
		return gate["error"] != "session_busy"
	}) {
		t.Fatal("the session stayed busy after the human's command")
	}
	g := wantError(t, gate, "user_activity_detected")
	cmds, _ := g["userCommands"].([]any)
	if len(cmds) != 1 || str(cmds[0].(map[string]any)["command"]) != "echo typed-in-tmux" {
		t.Fatalf("userCommands: %v", g["userCommands"])
	}
}

// TestAttachWatchDetaches: a watching attach in a real terminal (tmux),
// with --observe or for want of the operator token, leaves on Ctrl-] (and
// on Ctrl-C) instead of echoing ^], and its keys reach nothing.
func TestAttachWatchDetaches(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "wd"}))["sessionToken"])
	s := sess{srv, "wd", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "wd", "sessionToken": tok}))["monitoringUrl"])
	for _, c := range []struct {
		name string
		args []string
		key  string
	}{
		{"observe, Ctrl-]", []string{"--observe", "--data-dir", srv.dataDir}, "C-]"},
		{"observe, Ctrl-C", []string{"--observe", "--data-dir", srv.dataDir}, "C-c"},
		{"no token, Ctrl-]", []string{"--data-dir", t.TempDir()}, "C-]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The pane's shell says when attach has returned, and stays.
			line := binary + " attach " + strings.Join(c.args, " ") + " " + url + "; echo attach-returned-$?; sleep 600"
			pane := startTmux(t, "sh", "-c", line)
			pane.waitScreen(t, "Ctrl-] detaches")
			mark := "seen-" + strings.Fields(c.name)[0] + "-" + strings.Trim(c.key, "C-")
			if r := result(t, s.exec(t, "echo "+mark)); r["stdout"] != mark+"\n" {
				t.Fatalf("the agent's call beside a watcher: %v", r)
			}
			pane.waitScreen(t, mark)
			if out, err := pane.run("send-keys", "-l", "echo typed-by-watcher"); err != nil {
				t.Fatalf("send-keys: %v %s", err, out)
			}
			if out, err := pane.run("send-keys", c.key); err != nil {
				t.Fatalf("send-keys %s: %v %s", c.key, err, out)
			}
			pane.waitScreen(t, "attach-returned-0")
			if strings.Contains(pane.screen(), "^]") {
				t.Errorf("the pane echoed ^]:\n%s", pane.screen())
			}
			if r := result(t, s.exec(t, "echo after")); r["stdout"] != "after\n" {
				t.Fatalf("after the watcher left (its keys must have gone nowhere): %v", r)
			}
		})
	}
}

// TestAttachWithoutToken: attach with no operator token at hand (another
// data dir) only watches: it says so, and what is typed goes nowhere.
func TestAttachWithoutToken(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "nt"}))["sessionToken"])
	s := sess{srv, "nt", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "nt", "sessionToken": tok}))["monitoringUrl"])

	att := startAttach(t, "--data-dir", t.TempDir(), url)
	att.waitScreenText(t, "watching only")
	if _, err := io.WriteString(att.in, "echo typed-without-token\r"); err != nil {
		t.Fatal(err)
	}
	if r := result(t, s.exec(t, "echo agent-ran")); r["stdout"] != "agent-ran\n" {
		t.Fatalf("the agent's call beside a watching attach: %v", r)
	}
	att.waitScreenText(t, "agent-ran")
	if strings.Contains(att.screen(), "typed-without-token") {
		t.Error("attach without the operator token typed into the session")
	}
}

// TestAttachTokenStaysHome: attach presents the operator token only to the
// dashboard its data dir noted. A URL that points anywhere else (a program
// in a session listening on loopback, handing out a look-alike link) gets
// no token.
func TestAttachTokenStaysHome(t *testing.T) {
	srv := startServer(t, serverOpts{})
	got := make(chan http.Header, 1)
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(rogue.Close)

	att := startAttach(t, "--data-dir", srv.dataDir, rogue.URL+"/s/k-looks-like-a-session")
	if err := att.cmd.Wait(); err == nil {
		t.Errorf("attach to a URL with no session behind it succeeded:\n%s", att.screen())
	}
	select {
	case h := <-got:
		if a := h.Get("Authorization"); a != "" {
			t.Fatalf("attach sent %q to a listener that is not its dashboard", a)
		}
	default:
		t.Fatalf("attach never reached the listener:\n%s", att.screen())
	}
}

// selfTypeScript is a hostile agent's WebSocket client: it opens the
// monitoring socket of the URL in argv[1] as a browser would (the key is
// all it has), types "touch pwn" and a resize, then pings: the server
// handles one connection's messages in order, so the pong means they were
// dealt with.
const selfTypeScript = `import base64, json, os, socket, struct, sys
url = sys.argv[1][len("http://"):]
hostport, path = url.split("/", 1)
host, port = hostport.rsplit(":", 1)
s = socket.create_connection((host, int(port)))
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /%s/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: http://%s\r\n\r\n" % (path, hostport, key, hostport)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
lines = head.decode().split("\r\n")
print("status:", lines[0])
for l in lines:
    if l.lower().startswith("tandem-input:"):
        print("input:", l.split(":", 1)[1].strip())
def frame(op, payload):
    mask = os.urandom(4)
    n = len(payload)
    h = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    return h + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
s.sendall(frame(1, json.dumps({"t": "i", "d": "touch pwn\r"}).encode()))
s.sendall(frame(1, json.dumps({"t": "r", "c": 20, "r": 5}).encode()))
s.sendall(frame(9, b"sync"))
def need(n):
    global buf
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            sys.exit("closed")
        buf += d
while True:
    need(2)
    op, n, off = buf[0] & 15, buf[1] & 127, 2
    if n == 126:
        need(4); n, off = struct.unpack(">H", buf[2:4])[0], 4
    elif n == 127:
        need(10); n, off = struct.unpack(">Q", buf[2:10])[0], 10
    need(off + n)
    buf = buf[off + n:]
    if op == 10:
        print("pong")
        break
s.sendall(frame(8, struct.pack(">H", 1000)))
`

// TestSessionCannotTypeIntoItsOwnMonitor: a sandboxed local session with
// network access connects to its own monitoring WebSocket with the key the
// agent was given and types `touch pwn`. The server takes it for a viewer
// that watches: nothing is typed, no human command is recorded, and pwn
// does not exist.
func TestSessionCannotTypeIntoItsOwnMonitor(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "selftype.py"), []byte(selfTypeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOpts{config: "targets:\n  - {name: local, kind: local, workspace: " + ws + ", network: true}\n"})
	r := mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "self"}))
	s := sess{srv, "self", str(r["sessionToken"])}
	url := str(r["monitoringUrl"])
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("monitoringUrl %q", url)
	}

	res := result(t, s.exec(t, "python3 selftype.py "+url))
	out := str(res["stdout"])
	if !strings.Contains(out, "status: HTTP/1.1 101") || !strings.Contains(out, "pong") {
		t.Fatalf("the session's client did not reach its monitor (the attack was not tried): %v", res)
	}
	if !strings.Contains(out, "input: "+web.InputWatching) {
		t.Errorf("the server told the session's client %q, want it watching", out)
	}
	// Had the keys been typed, bash would read them once python exits: the
	// next call would be answered user_activity_detected.
	if r := result(t, s.exec(t, "ls")); strings.Contains(str(r["stdout"]), "pwn") {
		t.Fatalf("typed by the session into its own terminal: %v", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwn")); !os.IsNotExist(err) {
		t.Fatalf("pwn exists: %v", err)
	}
	if !strings.Contains(srv.log(), "dropping the keys of a viewer that may only watch") {
		t.Errorf("the server did not note the dropped keys:\n%s", lastN(srv.log(), 3000))
	}
}

// TestRelayKeys: attach's input pump sends keys and drops a terminal's
// answers, however they are split across reads; a sequence left open when
// input pauses (Esc, Alt-[) is keys; Ctrl-] detaches.
func TestRelayKeys(t *testing.T) {
	cases := []struct {
		name   string
		writes []string // each one read of the terminal
		want   string   // everything sent, in order
		pause  time.Duration
	}{
		{"typing and arrows", []string{"ls\r", "\x1b[A\x1bOB"}, "ls\r\x1b[A\x1bOB", answerPause},
		{"answers dropped", []string{"a\x1b[24;80R\x1b[?62;22c", "\x1bP>|tmux 3.3a\x1b\\b"}, "ab", answerPause},
		// The pause is long here so that a slow machine does not end it
		// between the two reads.
		{"an answer split across reads", []string{"a\x1b[24;", "80Rb"}, "ab", time.Minute},
		{"Esc alone, then a key", []string{"\x1b", "x"}, "\x1bx", answerPause},
		{"Alt-[ alone", []string{"\x1b["}, "\x1b[", answerPause},
		{"Ctrl-] detaches", []string{"q\x1dnot sent"}, "q", answerPause},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, w := io.Pipe()
			t.Cleanup(func() { _ = w.Close() })
			sent := make(chan string, 100)
			done := make(chan struct{})
			go func() {
				defer close(done)
				relayKeys(t.Context(), r, true, c.pause, func(k []byte) error { sent <- string(k); return nil })
			}()
			var got strings.Builder
			for _, s := range c.writes {
				if _, err := io.WriteString(w, s); err != nil && !strings.Contains(c.name, "detaches") {
					t.Fatal(err)
				}
			}
			for got.Len() < len(c.want) {
				select {
				case k := <-sent:
					got.WriteString(k)
				case <-time.After(10 * time.Second):
					t.Fatalf("sent %q, waiting for %q", got.String(), c.want)
				}
			}
			if got.String() != c.want {
				t.Fatalf("sent %q, want %q", got.String(), c.want)
			}
			if strings.Contains(c.name, "detaches") {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("Ctrl-] did not detach")
				}
			}
		})
	}
}
