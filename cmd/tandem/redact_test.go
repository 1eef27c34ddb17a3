package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// randomOf is n characters drawn from alphabet, new for every run, so a
// secret can only be in an output because tandem let it through.
func randomOf(t testing.TB, alphabet string, n int) string {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// dotEnv is a project's .env with five secrets of different kinds, and two
// values that are not secrets. It returns the file's text and the secrets.
func dotEnv(t testing.TB) (string, []string) {
	secrets := []string{
		randomOf(t, alnum, 20),                                       // DB_PASSWORD: only the file says so
		"ghp_" + randomOf(t, alnum, 36),                              // a GitHub token
		"sk_live_" + randomOf(t, alnum, 24),                          // a Stripe key
		"AKIA" + randomOf(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), // an AWS key id
		"correct horse " + randomOf(t, "abcdefghij", 8) + " staple",  // a phrase with spaces
	}
	text := fmt.Sprintf("# the app's settings\nPORT=5432\nDEBUG=true\nDB_PASSWORD=%s\nGITHUB_TOKEN=%s\nSTRIPE_KEY=%s\nAWS_ACCESS_KEY_ID=%s\nSESSION_SECRET=\"%s\"\n",
		secrets[0], secrets[1], secrets[2], secrets[3], secrets[4])
	return text, secrets
}

// leaked names the first secret found in text, or "".
func leaked(text string, secrets []string) string {
	for _, s := range secrets {
		if strings.Contains(text, s) {
			return s
		}
	}
	return ""
}

// noSecret fails t if text holds any secret, or a long piece of one.
func noSecret(t testing.TB, where, text string, secrets []string) {
	t.Helper()
	if s := leaked(text, secrets); s != "" {
		t.Errorf("%s holds the secret %.8s…:\n%s", where, s, lastN(text, 2000))
		return
	}
	for _, s := range secrets {
		if len(s) >= 24 && (strings.Contains(text, s[:len(s)/2]) || strings.Contains(text, s[len(s)/2:])) {
			t.Errorf("%s holds half of the secret %.8s…:\n%s", where, s, lastN(text, 2000))
		}
	}
}

// TestRedaction: a project's .env holds five secrets, and the target
// lists it in redact.secretFiles. Printed by cat, env, grep and python,
// by the agent or the human, whole or split across two writes with a
// pause between them, the secrets reach the agent only as
// [REDACTED:kind] markers: in the reply, its count, the read-back, the
// output resource, the progress notifications and the gate report. What
// is not a secret stays readable.
func TestRedaction(t *testing.T) {
	ws := t.TempDir()
	env, secrets := dotEnv(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress strings.Builder
	srv := startServer(t, serverOpts{dir: ws,
		config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + "}\nredact:\n  secretFiles: [.env, missing-in-this-project.env]\n",
		progress: func(r *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress.WriteString(r.Params.Message)
			mu.Unlock()
		}})
	s := connectTo(t, srv, "dev", "dev")
	args := func(m map[string]any) map[string]any {
		m["sessionName"], m["sessionToken"] = s.name, s.tok
		return m
	}

	for _, tc := range []struct {
		name, command string
		want          int // markers at least
	}{
		{"cat", "cat .env", 5},
		{"env", "set -a; . ./.env; set +a; env | sort", 5},
		{"grep", "grep -h -e PASSWORD -e TOKEN -e KEY -e SECRET .env", 5},
		{"python", `python3 -c 'print(open(".env").read())'`, 5},
		{"stderr", "cat .env >&2", 5},
		{"split", `printf 'split=%s' "${GITHUB_TOKEN:0:14}"; sleep 0.5; printf '%s\n' "${GITHUB_TOKEN:14}"`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := s.exec(t, tc.command)
			r := result(t, full)
			out, count := str(r["stdout"]), r["stdoutRedacted"]
			if tc.name == "stderr" {
				out, count = str(r["stderr"]), r["stderrRedacted"]
			}
			noSecret(t, "the reply", out, secrets)
			if n, _ := count.(float64); int(n) < tc.want || strings.Count(out, "[REDACTED:") != int(n) {
				t.Errorf("%v markers counted, %d in the text, want %d at least:\n%s", count, strings.Count(out, "[REDACTED:"), tc.want, out)
			}
			if tc.name == "cat" && (!strings.Contains(out, "PORT=5432\n") || !strings.Contains(out, "DEBUG=true\n")) {
				t.Errorf("values that are not secrets were hidden too:\n%s", out)
			}
			if tc.name == "split" && out != "split=[REDACTED:file]\n" {
				t.Errorf("the split token: %q", out)
			}
			stream := "stdout"
			if tc.name == "stderr" {
				stream = "stderr"
			}
			back := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": full["commandId"], "stream": stream})))
			noSecret(t, "the read-back", str(back["data"]), secrets)
			if back["data"] != out || back["redacted"] != count {
				t.Errorf("the read-back differs from the reply: %v", back)
			}
		})
	}

	t.Run("background", func(t *testing.T) {
		mustOK(t, s.exec(t, "(sleep 0.2; echo bg=$STRIPE_KEY) &"))
		var bg map[string]any
		waitFor(10*time.Second, func() bool {
			r := s.exec(t, "sleep 0.2")
			bg, _ = r["background"].(map[string]any)
			return bg != nil
		})
		if bg == nil || bg["stdout"] != "bg=[REDACTED:file]\n" || bg["stdoutRedacted"] != 1.0 {
			t.Errorf("the background output: %v", bg)
		}
	})

	t.Run("prompt", func(t *testing.T) {
		r := wantError(t, s.exec(t, `read -p "paste $GITHUB_TOKEN here> " x`, 1), "command_timeout")
		if line := str(r["lastLine"]); line != "paste [REDACTED:file] here> " {
			t.Errorf("lastLine %q (%v)", line, r)
		}
		mustOK(t, srv.call(t, "ssh_send_input", args(map[string]any{"commandId": r["commandId"], "input": "x\n"})))
		mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": r["commandId"], "waitSeconds": 5})))
	})

	t.Run("grep read-back", func(t *testing.T) {
		full := s.exec(t, "cat .env")
		for _, pattern := range []string{"ghp_", "sk_live", "AKIA", "horse"} {
			g := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": full["commandId"], "grep": pattern})))
			if m, _ := g["matches"].([]any); len(m) != 0 {
				t.Errorf("grep %q found a secret's start: %v", pattern, m)
			}
		}
	})

	t.Run("resource", func(t *testing.T) {
		r := result(t, s.exec(t, "head -c 300000 /dev/zero | tr '\\0' x; echo; cat .env; cat .env"))
		if r["stdoutTruncated"] != true {
			t.Fatalf("want an output over the inline budget: %v", r["stdoutBytes"])
		}
		noSecret(t, "the reply's head and tail", str(r["stdout"])+str(r["stdoutTail"]), secrets)
		all := string(readAll(t, srv.cs, r["stdoutResource"].(map[string]any)))
		noSecret(t, "the output resource", all, secrets)
		if n := strings.Count(all, "[REDACTED:"); n != 10 || r["stdoutRedacted"] != 10.0 {
			t.Errorf("the resource holds %d markers, the reply counts %v; want 10", n, r["stdoutRedacted"])
		}
	})

	t.Run("progress", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		params := &sdk.CallToolParams{Name: "ssh_exec", Arguments: args(map[string]any{
			"command": `cat .env; sleep 0.6; printf 'half %s' "${STRIPE_KEY:0:12}"; sleep 0.6; printf '%s\n' "${STRIPE_KEY:12}"; sleep 0.6; echo progress-end`})}
		params.SetProgressToken("redact")
		res, err := srv.cs.CallTool(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		mustOK(t, mcptest.Check(t, "ssh_exec", res))
		mu.Lock()
		got := progress.String()
		mu.Unlock()
		noSecret(t, "the progress notifications", got, secrets)
		if !strings.Contains(got, "[REDACTED:file]") || !strings.Contains(got, "half [REDACTED:") {
			t.Errorf("the progress notifications lack the markers:\n%s", got)
		}
	})

	// The agent may write the workspace: a listed secret file it turns
	// into a symlink to a file outside does not make tandem read it, or
	// say anything of it, when the next session connects.
	t.Run("symlink out of the workspace", func(t *testing.T) {
		mustOK(t, s.exec(t, "ln -s /etc/passwd missing-in-this-project.env"))
		r := srv.call(t, "ssh_connect", map[string]any{"name": "second", "target": "dev"})
		msg := str(r["message"])
		if r["success"] != false || !strings.Contains(msg, "leads out of") || strings.Contains(msg, "root:") {
			t.Errorf("connect with a secret file linked out of the workspace: %v", r)
		}
		mustOK(t, s.exec(t, "rm missing-in-this-project.env"))
	})

	t.Run("gate", func(t *testing.T) {
		mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
		token := dataDirToken(t, srv.dataDir)
		typeOverWebSocket(t, mon, token, "cat .env; echo human-$((0+1))\r", "human-1\r\n")
		typeOverWebSocket(t, mon, token, `printf 'typed=%s' "${AWS_ACCESS_KEY_ID:0:9}"; sleep 0.5; printf '%s\n' "${AWS_ACCESS_KEY_ID:9}"; echo human-$((1+1))`+"\r", "human-2\r\n")
		typeOverWebSocket(t, mon, token, ": "+secrets[1]+"; echo human-$((1+2))\r", "human-3\r\n")
		g := wantError(t, gateOf(t, s), "user_activity_detected")
		cmds, _ := g["userCommands"].([]any)
		// On a loaded machine bash may read the last line typed ahead
		// after the prompt already looked idle for a second: the gate then
		// reports it at the next call (the agent's line waits behind it).
		for len(cmds) < 3 {
			more := gateOf(t, s)
			if more["error"] != "user_activity_detected" {
				break
			}
			next, _ := more["userCommands"].([]any)
			cmds = append(cmds, next...)
			g["message"] = str(g["message"]) + " " + str(more["message"])
		}
		if len(cmds) != 3 {
			t.Fatalf("the gate reports %d commands, want 3: %v", len(cmds), g)
		}
		var all strings.Builder
		for _, c := range cmds {
			c := c.(map[string]any)
			all.WriteString(str(c["command"]) + "\n" + str(c["stdout"]) + "\n")
		}
		noSecret(t, "the gate report", all.String()+str(g["message"]), secrets)
		one, two, three := cmds[0].(map[string]any), cmds[1].(map[string]any), cmds[2].(map[string]any)
		if one["stdoutRedacted"] != 5.0 || !strings.Contains(str(two["stdout"]), "typed=[REDACTED:file]\n") {
			t.Errorf("the human's outputs: %v\n%v", one, two)
		}
		if !strings.Contains(str(three["command"]), ": [REDACTED:") {
			t.Errorf("the human's command line with a token: %q", three["command"])
		}
		back := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": one["commandId"]})))
		noSecret(t, "the human command's read-back", str(back["data"]), secrets)
	})
}

// TestRedactSSHCredentials: the password and the key passphrase tandem
// holds for an ssh session are redacted from its output with no redact
// section at all, even when the remote command prints them; so is the
// password a configured target reads from its passwordFile.
func TestRedactSSHCredentials(t *testing.T) {
	pw := "pw-" + randomOf(t, alnum, 20)
	ps := testenv.PasswordSSHD(t, "tester", pw)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOpts{config: fmt.Sprintf("targets:\n  - {name: box, kind: ssh, host: %s, port: %d, user: %s, passwordFile: %s, knownHosts: %s}\n",
		ps.Host, ps.Port, ps.User, pwFile, ps.KnownHostsFile)})
	base := map[string]any{"host": ps.Host, "port": ps.Port, "username": ps.User}
	for _, tc := range []struct {
		name   string
		params map[string]any
		secret string
		kind   string
	}{
		{"password", map[string]any{"password": pw}, pw, "ssh-password"},
		{"passphrase", map[string]any{"privateKey": string(ps.ClientKey), "passphrase": ps.Passphrase}, ps.Passphrase, "ssh-passphrase"},
		{"target", map[string]any{"target": "box"}, pw, "ssh-password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := map[string]any{"name": tc.name}
			for k, v := range tc.params {
				p[k] = v
			}
			if tc.name != "target" {
				for k, v := range base {
					p[k] = v
				}
			}
			s := sess{srv, tc.name, str(mustOK(t, srv.call(t, "ssh_connect", p))["sessionToken"])}
			// The remote side prints it as it would if a config file held it.
			half := len(tc.secret) / 2
			cmd := fmt.Sprintf("x=%s; y=%s; echo \"the password is $x$y\"; echo \"$x$y\" >&2", tc.secret[:half], tc.secret[half:])
			full := s.exec(t, cmd)
			r := result(t, full)
			want := "the password is [REDACTED:" + tc.kind + "]\n"
			if r["stdout"] != want || r["stderr"] != "[REDACTED:"+tc.kind+"]\n" || r["stdoutRedacted"] != 1.0 || r["stderrRedacted"] != 1.0 {
				t.Errorf("got %v, want stdout %q", r, want)
			}
			back := mustOK(t, srv.call(t, "ssh_read_output", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "commandId": full["commandId"]}))
			noSecret(t, "the read-back", str(back["data"]), []string{tc.secret})
		})
	}
}

// TestRedactViewers: with redact.viewers: true, what the browser terminal
// shows, the recording and the replay page hold markers instead of the
// secrets, the agent's output and the human's alike, and the keys a human
// types are recorded redacted too.
func TestRedactViewers(t *testing.T) {
	ws := t.TempDir()
	env, secrets := dotEnv(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOpts{dir: ws,
		config: "targets:\n  - name: dev\n    kind: local\n    workspace: " + ws + "\n    redact: {secretFiles: [.env], viewers: true}\n"})
	s := connectTo(t, srv, "dev", "dev")
	args := func(m map[string]any) map[string]any {
		m["sessionName"], m["sessionToken"] = s.name, s.tok
		return m
	}
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
	token := dataDirToken(t, srv.dataDir)

	// A viewer who is there from the start sees everything live.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	live, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(mon, "http")+"/ws", &websocket.DialOptions{HTTPHeader: operatorHeader(mon, token)})
	if err != nil {
		t.Fatal(err)
	}
	defer live.CloseNow()
	live.SetReadLimit(16 << 20)
	var seen strings.Builder
	seenDone := make(chan struct{})
	go func() {
		defer close(seenDone)
		for {
			typ, p, err := live.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				seen.Write(p)
				if strings.Contains(seen.String(), "viewer-4\r\n") {
					return
				}
			}
		}
	}()

	r := result(t, s.exec(t, "cat .env; echo agent-done"))
	noSecret(t, "the agent's reply", str(r["stdout"]), secrets)
	typeOverWebSocket(t, mon, token, "cat .env; : "+secrets[1]+"; echo human-$((6*7))\r", "human-42\r\n")
	wantError(t, gateOf(t, s), "user_activity_detected")
	mustOK(t, s.exec(t, "echo viewer-$((2+2))"))
	select {
	case <-seenDone:
	case <-ctx.Done():
		t.Fatalf("the live viewer never saw the last command; it saw:\n%s", lastN(seen.String(), 2000))
	}
	noSecret(t, "the live terminal", seen.String(), secrets)
	if n := strings.Count(seen.String(), "[REDACTED:"); n < 10 {
		t.Errorf("the live terminal shows %d markers, want 10 at least:\n%s", n, lastN(seen.String(), 3000))
	}
	mustOK(t, srv.call(t, "ssh_disconnect", args(map[string]any{})))

	castFile, _, events := onlyCast(t, srv.dataDir)
	var cast strings.Builder
	for _, e := range events {
		cast.WriteString(e.Data)
	}
	noSecret(t, "the recording", cast.String(), secrets)
	raw, err := os.ReadFile(castFile)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "the recording's file", string(raw), secrets)

	b := testenv.Browser(t)
	err = chromedp.Do(b, chromedp.Navigate(mon), chromedp.WaitReady(chromedp.ID("speed")),
		chromedp.SetValue(chromedp.ID("speed"), "instant"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("speed").dispatchEvent(new Event("change"))`))
	if err != nil {
		t.Fatal(err)
	}
	screen := waitScreen(t, b, func(s string) bool { return contains(s, "human-42") && contains(s, "[REDACTED:") })
	noSecret(t, "the replay page", screen, secrets)
}

// gateOf is the reply to the agent's next call once the human's command
// has ended: the gate's report.
func gateOf(t *testing.T, s sess) map[string]any {
	t.Helper()
	var gate map[string]any
	if !waitFor(15*time.Second, func() bool {
		gate = s.exec(t, "true")
		return gate["error"] != "session_busy" // the human's command is still ending
	}) {
		t.Fatalf("the session stayed busy after the human's command: %v", gate)
	}
	return gate
}

// TestRedactRawExport: with redact.rawKey, the exact bytes of every stream
// that had secrets redacted are kept sealed to the operator's public key.
// `tandem audit raw` with the private key prints them, the agent's and the
// human's; another key opens nothing; a stream with nothing redacted keeps
// no sealed copy; and no file in the data dir holds a secret in the clear
// (viewers: true keeps the recording redacted too).
func TestRedactRawExport(t *testing.T) {
	keys := t.TempDir()
	priv, pub := filepath.Join(keys, "raw.key"), filepath.Join(keys, "raw.pub")
	if out, err := tandemCLI(t, "audit", "raw-keys", priv, pub); err != nil {
		t.Fatalf("raw-keys: %v\n%s", err, out)
	}
	if out, err := tandemCLI(t, "audit", "raw-keys", priv, pub); err == nil || !strings.Contains(out, "never overwritten") {
		t.Errorf("raw-keys over existing keys: %v\n%s", err, out)
	}
	otherPriv, otherPub := filepath.Join(keys, "other.key"), filepath.Join(keys, "other.pub")
	if out, err := tandemCLI(t, "audit", "raw-keys", otherPriv, otherPub); err != nil {
		t.Fatalf("raw-keys: %v\n%s", err, out)
	}
	ws := t.TempDir()
	env, secrets := dotEnv(t)
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOpts{dir: ws,
		config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + "}\nredact: {secretFiles: [.env], viewers: true, rawKey: " + pub + "}\n"})
	s := connectTo(t, srv, "dev", "dev")
	agent := s.exec(t, "cat .env; cat .env >&2")
	if r := result(t, agent); r["stdoutRedacted"] != 5.0 || r["stderrRedacted"] != 5.0 {
		t.Fatalf("the agent's reply: %v", r)
	}
	plain := s.exec(t, "echo nothing secret")
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "dev", "sessionToken": s.tok}))["monitoringUrl"])
	typeOverWebSocket(t, mon, dataDirToken(t, srv.dataDir), "cat .env; echo raw-$((3*3))\r", "raw-9\r\n")
	g := wantError(t, gateOf(t, s), "user_activity_detected")
	human := g["userCommands"].([]any)[0].(map[string]any)
	mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": "dev", "sessionToken": s.tok}))

	raw := func(id, stream, key string) (string, error) {
		return tandemCLI(t, "audit", "raw", id, "--stream", stream, "--key", key, "--data-dir", srv.dataDir)
	}
	for _, stream := range []string{"stdout", "stderr"} {
		if out, err := raw(str(agent["commandId"]), stream, priv); err != nil || out != env {
			t.Errorf("the agent's exact %s: %v\n%q\nwant\n%q", stream, err, out, env)
		}
	}
	if out, err := raw(str(human["commandId"]), "stdout", priv); err != nil || !strings.Contains(out, env) || !strings.Contains(out, "raw-9") {
		t.Errorf("the human's exact output: %v\n%s", err, out)
	}
	if out, err := raw(str(agent["commandId"]), "stdout", otherPriv); err == nil || !strings.Contains(out, "does not open with this key") || leaked(out, secrets) != "" {
		t.Errorf("another key: %v\n%s", err, out)
	}
	if out, err := raw(str(plain["commandId"]), "stdout", priv); err == nil || !strings.Contains(out, "nothing in it was redacted") {
		t.Errorf("a stream with nothing redacted: %v\n%s", err, out)
	}
	if out, err := raw("../../etc/passwd", "stdout", priv); err == nil || !strings.Contains(out, "not a command id") {
		t.Errorf("a path as the id: %v\n%s", err, out)
	}

	_ = srv.cs.Close() // closes stdin and waits for the process: every file is written
	err := filepath.WalkDir(srv.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		noSecret(t, p, string(b), secrets)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSecretFileErrorsStayWithTheOperator: a secret file of the
// operator's (outside the workspace) that cannot be used refuses the
// session without telling the agent its path or anything of its content
// (a JSON error quotes a character); tandem's log has it all. A file of
// the workspace, the agent's own, is named with its line, to be fixed.
func TestSecretFileErrorsStayWithTheOperator(t *testing.T) {
	ws, opdir := t.TempDir(), t.TempDir()
	creds := filepath.Join(opdir, "creds.json")
	if err := os.WriteFile(creds, []byte(`{"token": "s3cr3t-value-123456", Xbroken}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "targets:\n  - {name: dev, kind: local, workspace: " + ws + ", redact: {secretFiles: [" + creds + ", .env]}}\n"
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	r := srv.call(t, "ssh_connect", map[string]any{"name": "a", "target": "dev"})
	msg := str(r["message"])
	if r["success"] != false || !strings.Contains(msg, "tandem's log says which") {
		t.Fatalf("connect with a broken operator file: %v", r)
	}
	for _, leak := range []string{opdir, "creds", "'X'", "invalid character", "token", "s3cr3t"} {
		if strings.Contains(msg, leak) {
			t.Errorf("the agent was told %q: %s", leak, msg)
		}
	}
	if log := srv.log(); !strings.Contains(log, creds) || !strings.Contains(log, "invalid character") {
		t.Errorf("tandem's log does not say which file and why:\n%s", lastN(log, 2000))
	}

	if err := os.WriteFile(creds, []byte(`{"token": "s3cr3t-value-123456"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("OK=1\nnot a dotenv line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = srv.call(t, "ssh_connect", map[string]any{"name": "b", "target": "dev"})
	if msg := str(r["message"]); r["success"] != false || !strings.Contains(msg, ".env: line 2") {
		t.Fatalf("connect with a broken workspace .env: %v", r)
	}
	if err := os.Remove(filepath.Join(ws, ".env")); err != nil {
		t.Fatal(err)
	}
	mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "c", "target": "dev"}))
}

// TestSecretFileWrittenLater: a .env that a human writes in the terminal
// after the session started counts from then on: the gate's report of
// that very command hides the value in its line, and the agent's next
// `cat .env` comes back redacted. A value the file no longer holds stays
// hidden.
func TestSecretFileWrittenLater(t *testing.T) {
	ws := t.TempDir()
	srv := startServer(t, serverOpts{dir: ws,
		config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + "}\nredact:\n  secretFiles: [.env]\n"})
	s := connectTo(t, srv, "dev", "dev")
	const first, second = "late-secret-value-4242", "rotated-secret-value-77"
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	typeOverWebSocket(t, mon, dataDirToken(t, srv.dataDir), "printf 'API_KEY=%s\\n' "+first+" > .env; echo wrote-$((1+1))\r", "wrote-2\r\n")
	g := wantError(t, gateOf(t, s), "user_activity_detected")
	if raw, _ := json.Marshal(g["userCommands"]); strings.Contains(string(raw), first) || !strings.Contains(string(raw), "[REDACTED:file]") {
		t.Errorf("the gate's report of the command that wrote .env: %s", raw)
	}
	r := result(t, s.exec(t, "cat .env"))
	if out := str(r["stdout"]); out != "API_KEY=[REDACTED:file]\n" {
		t.Fatalf("cat .env after it was written: %q", out)
	}
	mustOK(t, s.exec(t, "printf 'API_KEY=%s\\n' "+second+" > .env.new && mv .env.new .env"))
	r = result(t, s.exec(t, "cat .env; echo "+first))
	if out := str(r["stdout"]); out != "API_KEY=[REDACTED:file]\n[REDACTED:file]\n" {
		t.Fatalf("after the value changed: %q", out)
	}
	// The agent's last command writes a value; a human prints it next.
	const third = "third-secret-value-99"
	mustOK(t, s.exec(t, "printf 'API_KEY=%s\\n' "+third+" > .env"))
	typeOverWebSocket(t, mon, dataDirToken(t, srv.dataDir), "cat .env; echo h-$((2+3))\r", "h-5\r\n")
	g = wantError(t, gateOf(t, s), "user_activity_detected")
	if raw, _ := json.Marshal(g["userCommands"]); strings.Contains(string(raw), third) || !strings.Contains(string(raw), "API_KEY=[REDACTED:file]") {
		t.Errorf("a human's cat of a .env the agent just wrote: %s", raw)
	}
}
