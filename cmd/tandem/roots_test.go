//lint:file-ignore SA1019 MCP roots are deprecated by SEP-2577 (2026-07-28) but still work, and stdio clients on 2025-11-25 use them to name the workspace.

package main

import (
	"strings"
	"testing"
	"time"
)

// TestRootsChooseWorkspace: over stdio with no configured workspace, the
// client's MCP roots pick it; the first answer locks it, and a later
// change is logged and ignored. A root tandem would refuse as a workspace
// is refused with the same advice.
func TestRootsChooseWorkspace(t *testing.T) {
	home := t.TempDir()
	project, later := t.TempDir(), t.TempDir()
	// Started from $HOME, which on its own is refused as a workspace.
	s := startServer(t, serverOpts{home: home, dir: home, roots: []string{project, later}})
	r := mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "a"}))
	if r["workspace"] != project {
		t.Fatalf("workspace = %v, want the first root %s", r["workspace"], project)
	}
	if out := result(t, s.call(t, "ssh_exec", map[string]any{"sessionName": "a", "sessionToken": str(r["sessionToken"]), "command": "pwd"})); out["stdout"] != project+"\n" {
		t.Errorf("pwd = %q", out["stdout"])
	}
	s.client.RemoveRoots("file://" + project)
	if !waitFor(10*time.Second, func() bool { return strings.Contains(s.log(), "roots changed") }) {
		t.Fatal("the roots change was not logged")
	}
	r2 := mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "b"}))
	if r2["workspace"] != project {
		t.Errorf("after the roots changed, workspace = %v, want it to stay %s", r2["workspace"], project)
	}

	bad := startServer(t, serverOpts{dir: t.TempDir(), roots: []string{"/"}})
	e := wantError(t, bad.call(t, "ssh_connect", map[string]any{"name": "a"}), "sandbox_unavailable")
	if m := str(e["message"]); !strings.Contains(m, "root directory") || !strings.Contains(m, "--workspace") {
		t.Errorf("a root of / answered %q", m)
	}
}

// TestRootsOlderProtocol: a TypeScript-SDK client (protocol 2025-11-25)
// is asked for its roots directly, and its first root is the workspace.
func TestRootsOlderProtocol(t *testing.T) {
	project := t.TempDir()
	c := startTSClientEnv(t, []string{"TANDEM_ROOTS=" + project}, "serve", "--web", "127.0.0.1:0", "--data-dir", t.TempDir())
	r := c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_connect", "args": map[string]any{"name": "a"}}).Reply
	if r["success"] != true || r["workspace"] != project {
		t.Fatalf("connect: %v, want workspace %s", r, project)
	}
}
