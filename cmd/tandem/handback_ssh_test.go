package main

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestHandBackSecretsOverSSH: the hand-back's promise holds over SSH, where
// tandem sees the terminal only through sshd. The agent answers a plain
// read with ssh_send_input (echoed, and audited as typed) and a read -s
// (not echoed, kept out of the audit). Then it asks for the human, who
// answers, in the browser, three prompts that do not echo: read -s, a
// program that turns echo off itself, and Python's getpass. None of the
// four secrets is in any reply, file of the data dir (recording, audit,
// database), tandem's log, or the recording the watch link serves; that
// recording has no input events at all, and the operator's has the
// human's command lines.
func TestHandBackSecretsOverSSH(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3 not found: %v", err)
	}
	d := testenv.SSHD(t)
	srv := startServer(t, serverOpts{})
	var replies []map[string]any
	call := func(tool string, args map[string]any) map[string]any {
		r := srv.call(t, tool, args)
		replies = append(replies, r)
		return r
	}
	tok := str(mustOK(t, call("ssh_connect", map[string]any{"name": "far", "host": d.Host, "port": d.Port,
		"username": d.User, "keyFilePath": d.ClientKeyFile}))["sessionToken"])
	args := func(more map[string]any) map[string]any {
		more["sessionName"], more["sessionToken"] = "far", tok
		return more
	}

	// The agent at a prompt that echoes, and at one that does not.
	visible, agentPin := secret("agent-visible-"), secret("agent-pin-")
	for _, tc := range []struct {
		command, keys, want string
		echoed              bool
	}{
		{`read -r -p 'Name: ' n; echo "name=${#n}"`, visible, "name=38", true},
		{`read -rs -p 'PIN: ' n; echo; echo "pin=${#n}"`, agentPin, "pin=34", false},
	} {
		id := str(wantError(t, call("ssh_exec", args(map[string]any{"command": tc.command, "timeoutSeconds": 1})), "command_timeout")["commandId"])
		r := mustOK(t, call("ssh_send_input", args(map[string]any{"commandId": id, "input": tc.keys, "submit": true, "waitSeconds": 10})))
		if r["echoed"] != tc.echoed || !strings.Contains(str(result(t, r)["stdout"]), tc.want) {
			t.Fatalf("ssh_send_input at %q: %v", tc.command, r)
		}
	}

	url := str(mustOK(t, call("ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
	const ask = "Enter the passwords at the prompts"
	id := str(wantError(t, call("ssh_request_human", args(map[string]any{"message": ask, "waitSeconds": 1})), "human_pending")["requestId"])
	answered := make(chan map[string]any, 1)
	go func() {
		for {
			r := srv.call(t, "ssh_request_human", args(map[string]any{"requestId": id, "waitSeconds": 5}))
			if r["error"] != "human_pending" {
				answered <- r
				return
			}
		}
	}()

	ctx := testenv.Browser(t)
	signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `document.getElementById('request').hidden ? '' : document.getElementById('request-message').textContent`, ask)
	var human []string
	for _, p := range []struct{ line, prompt, done string }{
		{`read -rs -p 'Password: ' pw && echo "got ${#pw} characters"`, "Password:", "got 27 characters"},
		{`stty -echo; printf 'Code: '; read -r pw; stty echo; echo; echo "got2 ${#pw}"`, "Code:", "got2 27"},
		{`python3 -c 'import getpass; print("got3", len(getpass.getpass("Pass: ")))'`, "Pass:", "got3 27"},
	} {
		pw := secret("pw-")
		human = append(human, pw)
		typeKeys(t, ctx, p.line+"\r")
		// The prompt on a line of its own: the typed line's own echo,
		// half drawn, can end in it too (getpass("Pass:).
		waitScreen(t, ctx, func(s string) bool { return strings.HasSuffix(strings.TrimRight(s, " \n"), "\n"+p.prompt) })
		typeKeys(t, ctx, pw+"\r")
		waitScreen(t, ctx, func(s string) bool { return promptAfter(s, p.done) })
	}
	typeKeys(t, ctx, "echo second\r")
	waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "second") })
	if err := chromedp.Do(ctx, chromedp.SendKeys("#request-note", "typed them"), chromedp.Click("#handback")); err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	select {
	case r = <-answered:
		replies = append(replies, r)
	case <-time.After(60 * time.Second):
		t.Fatal("the agent's call did not answer after the hand-back")
	}
	if r = mustOK(t, r); r["note"] != "typed them" || r["userCommandCount"] != 4.0 {
		t.Fatalf("the hand-back: %v", r)
	}
	mustOK(t, call("ssh_disconnect", args(map[string]any{})))

	// The recording, as the watch link and as the operator get it.
	cast := func(cookie bool) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			req, err := http.NewRequest(http.MethodGet, url+"/cast", nil)
			if err != nil {
				t.Fatal(err)
			}
			if cookie {
				req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: dataDirToken(t, srv.dataDir)})
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s/cast: %s", url, resp.Status)
			}
			time.Sleep(50 * time.Millisecond) // the recording is served once it is closed
		}
	}
	watched, operator := cast(false), cast(true)
	if strings.Contains(watched, `, "i", `) || !strings.Contains(watched, "second") {
		t.Errorf("the watch link's recording has input events, or no output:\n%s", lastN(watched, 2000))
	}
	if !strings.Contains(operator, `, "i", "e"]`) || !strings.Contains(operator, `, "i", "\r"]`) {
		t.Errorf("the operator's recording lacks the human's keys:\n%s", lastN(operator, 2000))
	}
	audit, err := tandemCLI(t, "audit", "tail", "--data-dir", srv.dataDir, "--json", "-n", "100000")
	if err != nil {
		t.Fatalf("audit tail: %v\n%s", err, audit)
	}
	if !strings.Contains(audit, visible) {
		t.Errorf("the agent's keys at a prompt that echoes are not in the audit")
	}
	_ = srv.cs.Close()
	srv.waitExit(t, 10*time.Second)

	log := srv.log()
	all := strings.Join(flatten(replies), " ")
	for _, pw := range append(human, agentPin) {
		for where, text := range map[string]string{"tandem's log": log, "a reply": all, "the watch link's recording": castText(t, watched),
			"the operator's recording": castText(t, operator), "the audit": audit} {
			if strings.Contains(text, pw) {
				t.Errorf("the secret %s is in %s", pw, where)
			}
		}
		err := filepath.WalkDir(srv.dataDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.HasSuffix(p, ".cast") {
				b = append(b, castText(t, string(b))...)
			}
			if bytes.Contains(b, []byte(pw)) {
				t.Errorf("the secret %s is in %s", pw, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// castText is what a recording's events say, each kind joined on its own
// line: a person's keys come one event per key, so a secret typed into the
// recording is found only in the joined input.
func castText(t *testing.T, cast string) string {
	t.Helper()
	_, events, err := recording.Read(strings.NewReader(cast))
	if err != nil {
		t.Fatalf("read the recording: %v", err)
	}
	joined := map[string]*strings.Builder{}
	for _, e := range events {
		if joined[e.Code] == nil {
			joined[e.Code] = &strings.Builder{}
		}
		joined[e.Code].WriteString(e.Data)
	}
	var out strings.Builder
	for code, b := range joined {
		out.WriteString(code + ": " + b.String() + "\n")
	}
	return out.String()
}
