package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/session"
)

// TestUserFileReplies: the files a human moved on the monitoring page come
// on the next reply that names the session, whatever the tool, once, in
// the shape the tools' closed output schemas describe; another session's
// reply does not carry them.
func TestUserFileReplies(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	valid := schemas(t, c)
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		r := c.Call(t, tool, args)
		valid(tool, r)
		return r
	}
	connect := func(name string) (*session.Session, func(map[string]any) map[string]any) {
		conn := mcptest.MustOK(t, call("ssh_connect", map[string]any{"name": name}))
		tok := mcptest.Str(conn["sessionToken"])
		url := mcptest.Str(conn["monitoringUrl"])
		sess, _ := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
		return sess, func(extra map[string]any) map[string]any {
			extra["sessionName"], extra["sessionToken"] = name, tok
			return extra
		}
	}
	sess, args := connect("files")
	_, other := connect("other")
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	sess.FileMoved(session.UserFile{Path: "in/a.bin", Bytes: 7, SHA256: strings.Repeat("ab", 32), Viewer: "operator 127.0.0.1:1", Direction: session.FileUpload, At: at})
	sess.FileMoved(session.UserFile{Path: "out.tgz", Bytes: 9, SHA256: strings.Repeat("cd", 32), Viewer: "admitted viewer 127.0.0.1:2", Direction: session.FileDownload, At: at.Add(time.Second)})

	if r := mcptest.MustOK(t, call("ssh_exec", other(map[string]any{"command": "true"}))); r["userFiles"] != nil {
		t.Errorf("another session's reply tells the files: %v", r)
	}
	r := mcptest.MustOK(t, call("ssh_exec", args(map[string]any{"command": "true"})))
	list, _ := r["userFiles"].([]any)
	if len(list) != 2 || mcptest.Str(r["userFilesHint"]) == "" {
		t.Fatalf("userFiles: %v", r)
	}
	up, down := list[0].(map[string]any), list[1].(map[string]any)
	if up["path"] != "in/a.bin" || up["bytes"] != 7.0 || up["sha256"] != strings.Repeat("ab", 32) || up["direction"] != "upload" ||
		up["viewer"] != "operator 127.0.0.1:1" || up["at"] != "2026-11-29T10:00:00Z" {
		t.Errorf("the upload: %v", up)
	}
	if down["direction"] != "download" || down["path"] != "out.tgz" {
		t.Errorf("the download: %v", down)
	}
	if r := mcptest.MustOK(t, call("ssh_list_sessions", map[string]any{})); r["userFiles"] != nil {
		t.Errorf("a reply naming no session tells files: %v", r)
	}
	if r := mcptest.MustOK(t, call("ssh_exec", args(map[string]any{"command": "true"}))); r["userFiles"] != nil {
		t.Errorf("the files told twice: %v", r)
	}
}
