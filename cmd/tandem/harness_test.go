package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/sandbox"
)

// binary is the tandem binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ArgName {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	dir, err := os.MkdirTemp("", "tandem-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tandem")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is one `tandem serve` process and its MCP client.
type server struct {
	cs      *sdk.ClientSession
	home    string
	dataDir string
	stderr  *os.File
}

type serverOpts struct {
	dir    string // working directory (the default local workspace)
	config string // tandem.yaml content, if any
	env    []string
}

// startServer spawns the built binary over stdio, the way MCP clients do.
func startServer(t *testing.T, o serverOpts) *server {
	t.Helper()
	home := t.TempDir()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	s := &server{home: home, dataDir: filepath.Join(home, "state")}
	args := []string{"serve", "--web", "127.0.0.1:0", "--data-dir", s.dataDir, "--log-level", "debug"}
	if o.config != "" {
		p := filepath.Join(home, "tandem.yaml")
		if err := os.WriteFile(p, []byte(o.config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir = o.dir
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "USER=" + os.Getenv("USER")}, o.env...)
	errf, err := os.Create(filepath.Join(home, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.stderr = errf
	cmd.Stderr = errf
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to tandem: %v (stderr: %s)", err, s.log())
	}
	s.cs = cs
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

func (s *server) log() string {
	b, _ := os.ReadFile(s.stderr.Name())
	return string(b)
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call invokes a tool and checks the wire contract of every reply: one JSON
// object, the same in structuredContent and content[0].text, isError exactly
// when success is false.
func (s *server) call(t *testing.T, tool string, args any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return checkReply(t, tool, res)
}

func checkReply(t *testing.T, tool string, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%s: want exactly one content item, got %d", tool, len(res.Content))
	}
	text, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("%s: content[0] is %T, want text", tool, res.Content[0])
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		t.Fatalf("%s: content[0].text is not a JSON object: %v", tool, err)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var structured map[string]any
	if err := json.Unmarshal(raw, &structured); err != nil {
		t.Fatalf("%s: structuredContent is not an object: %v", tool, err)
	}
	if !reflect.DeepEqual(fromText, structured) {
		t.Fatalf("%s: structuredContent and content[0].text differ", tool)
	}
	success, ok := structured["success"].(bool)
	if !ok {
		t.Fatalf("%s: reply has no boolean success: %s", tool, text.Text)
	}
	if res.IsError == success {
		t.Fatalf("%s: isError=%v but success=%v", tool, res.IsError, success)
	}
	if !success {
		if code, _ := structured["error"].(string); code == "" {
			t.Fatalf("%s: failure without an error code: %s", tool, text.Text)
		}
		if msg, _ := structured["message"].(string); msg == "" {
			t.Fatalf("%s: failure without a message: %s", tool, text.Text)
		}
	}
	return structured
}

// mustOK fails the test unless the reply succeeded.
func mustOK(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	if r["success"] != true {
		b, _ := json.Marshal(r)
		t.Fatalf("want success, got %s", lastN(string(b), 2000))
	}
	return r
}

// wantError fails the test unless the reply failed with code.
func wantError(t *testing.T, r map[string]any, code string) map[string]any {
	t.Helper()
	if r["success"] != false || r["error"] != code {
		b, _ := json.Marshal(r)
		t.Fatalf("want error %s, got %s", code, lastN(string(b), 2000))
	}
	return r
}

func result(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	res, ok := mustOK(t, r)["result"].(map[string]any)
	if !ok {
		t.Fatalf("reply has no result object: %v", r)
	}
	return res
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
