package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/target"
	"golang.org/x/sys/unix"
)

// isTerminal reports whether r is a terminal: a person ran tandem serve by
// hand, where an MCP client would have given it a pipe.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newcomerHint is the one line a person who started tandem serve by hand
// sees: what it is waiting for and how to hand it to a client instead.
func newcomerHint(self string, f serveFlags, cfg *config.Config, refused map[string]string) string {
	bin, build := self, ""
	if strings.Contains(self, "go-build") { // go run: a throwaway binary, built again at once
		bin, build = "$HOME/.local/bin/tandem", "go build -o $HOME/.local/bin/tandem ./cmd/tandem && "
	}
	args := ""
	switch t := cfg.Targets; {
	case f.config != "":
		abs, _ := filepath.Abs(f.config)
		args = " --config " + abs
		if f.workspace != "" {
			ws, _ := filepath.Abs(f.workspace)
			args += " --workspace " + ws
		}
	case len(t) == 1 && refused[target.RefusedKey(config.DefaultTenant, t[0].Name)] != "":
		args = " --workspace /path/to/your/project"
	case len(t) == 1:
		args = " --workspace " + t[0].Workspace
	}
	return "tandem speaks MCP over stdin/stdout and is meant to be started by an MCP client; add it with:\n  " +
		build + "claude mcp add tandem -- " + bin + " serve" + args +
		"\n(other clients: see the README). Waiting for MCP messages; Ctrl-D or Ctrl-C quits."
}
