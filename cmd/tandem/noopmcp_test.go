package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// noopServerArg makes the test binary a go-sdk MCP server whose one tool,
// ssh_exec, does nothing and answers as tandem answers `echo hello`. The
// HTTP benchmark runs it beside tandem to tell what the SDK's transports
// cost on their own from what tandem adds to them.
const noopServerArg = "sdk-noop-server"

type noopIn struct {
	SessionName  string `json:"sessionName"`
	SessionToken string `json:"sessionToken"`
	Command      string `json:"command"`
}

type noopResult struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int    `json:"durationMs"`
	Cwd        string `json:"cwd"`
}

type noopOut struct {
	Success   bool       `json:"success"`
	CommandID string     `json:"commandId"`
	Result    noopResult `json:"result"`
}

// noopServerMain serves the no-op server over stdio, or with --http over
// stateless Streamable HTTP on a free loopback port, whose endpoint URL it
// prints as its first line; it then serves until stdin closes.
func noopServerMain(args []string) int {
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk-noop", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "ssh_exec", Description: "Answers as if it ran the command."},
		func(context.Context, *sdk.CallToolRequest, noopIn) (*sdk.CallToolResult, noopOut, error) {
			return nil, noopOut{Success: true, CommandID: "noop", Result: noopResult{Stdout: "hello\n", Cwd: "/"}}, nil
		})
	if len(args) == 0 {
		if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "sdk-noop-server:", err)
			return 1
		}
		return 0
	}
	if args[0] != "--http" {
		fmt.Fprintln(os.Stderr, "usage: sdk-noop-server [--http]")
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk-noop-server:", err)
		return 1
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// startNoopHTTP starts the no-op server over HTTP and returns its URL.
func startNoopHTTP(b testing.TB) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], noopServerArg, "--http")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		b.Fatalf("no-op server: %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}

// noopGoSDK connects a go-sdk client to the no-op server: over stdio when
// url is empty (the server a child of the client, as tandem is), else over
// HTTP with Go's default keep-alive transport.
func noopGoSDK(b testing.TB, url string) sess {
	b.Helper()
	var t sdk.Transport = &sdk.CommandTransport{Command: exec.Command(os.Args[0], noopServerArg)}
	if url != "" {
		t = &sdk.StreamableClientTransport{Endpoint: url}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench-noop", Version: "1"}, nil).Connect(ctx, t, nil)
	if err != nil {
		b.Fatalf("connect to the no-op server: %v", err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return sess{&tandemProc{cs: cs}, "noop", "noop"}
}
