package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/sandbox"
)

// initCmd writes a starter tandem.yaml: the first config a newcomer
// needs, commented, that loads as written and lies outside the workspace
// it names (tandem refuses a config its sessions could rewrite).
func initCmd(stdout io.Writer) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a commented starter tandem.yaml for the project directory DIR (default: the current directory)",
		Long: "Write a starter tandem.yaml: one sandboxed local target whose workspace is DIR (created if its parent exists), " +
			"a policy that asks before git push, rm -rf and package publishing, no network, and redaction of the project's .env. " +
			"The file goes outside the workspace, where sessions cannot rewrite it: ./tandem.yaml when the current directory " +
			"is not inside DIR (tandem init myproject), else $XDG_CONFIG_HOME/tandem/NAME.yaml (~/.config/tandem/NAME.yaml), " +
			"NAME being DIR's base name; --output chooses another place. An existing file is never overwritten. " +
			"Then it prints the line that adds tandem with this config to Claude Code.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			home, _ := os.UserHomeDir()
			self, _ := os.Executable()
			return initConfig(stdout, dir, output, home, self)
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "", "where to write the file (default: ./tandem.yaml outside DIR, else ~/.config/tandem/NAME.yaml); never inside DIR")
	return c
}

// initConfig is tandem init: the workspace dir, the file to write ("" for
// the default place), the user's home and tandem's own executable.
func initConfig(stdout io.Writer, dir, output, home, self string) error {
	ws, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	created := false
	switch fi, err := os.Stat(ws); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(ws, 0o755); err != nil {
			return fmt.Errorf("create the workspace %s: %w", ws, err)
		}
		created = true
	case err != nil:
		return fmt.Errorf("the workspace %s: %w", ws, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: name the project directory the agent may work in", ws)
	}
	if ws == "/" || (home != "" && ws == filepath.Clean(home)) {
		return fmt.Errorf("%s as the workspace would let a session change anything in it: name a project directory, such as tandem init ~/src/myproject", ws)
	}
	if output == "" {
		output, err = defaultInitPath(ws, home)
		if err != nil {
			return err
		}
	}
	if output, err = filepath.Abs(output); err != nil {
		return err
	}
	if sandbox.Covers(ws, output) {
		return fmt.Errorf("%s lies inside the workspace %s, which the agent's sessions can write, and tandem refuses to start on a config they could rewrite: "+
			"pass --output with a path outside it (or run tandem init from the directory above, as tandem init %s)", output, ws, filepath.Base(ws))
	}
	if err := os.MkdirAll(filepath.Dir(output), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(output), err)
	}
	f, err := os.OpenFile(output, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; tandem init never overwrites: remove it, or pass --output with another path", output)
	}
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, starterConfig(ws)); err != nil {
		f.Close()
		os.Remove(output)
		return fmt.Errorf("write %s: %w", output, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(output)
		return fmt.Errorf("write %s: %w", output, err)
	}
	// What was written must load: a starter that fails at start is worse
	// than none.
	if _, err := config.Load(output, home); err != nil {
		os.Remove(output)
		return fmt.Errorf("the starter config does not load (a bug in tandem init): %w", err)
	}
	bin, build := self, ""
	if self == "" || strings.Contains(self, "go-build") { // go run: a throwaway binary
		bin, build = "$HOME/.local/bin/tandem", "go build -o $HOME/.local/bin/tandem ./cmd/tandem && "
	}
	note := ""
	if created {
		note = " (created)"
	}
	_, err = fmt.Fprintf(stdout, "wrote %s for the workspace %s%s, outside it so the agent cannot rewrite it.\n"+
		"Add tandem with it to Claude Code:\n  %sclaude mcp add tandem -- %s serve --config %s\n"+
		"(other clients: args [\"serve\", \"--config\", %q]; edit the file to change the policy, the network or the redaction).\n",
		output, ws, note, build, shellWord(bin), shellWord(output), output)
	return err
}

// defaultInitPath is where tandem init writes without --output:
// ./tandem.yaml when the current directory lies outside the workspace,
// else the user's config directory, named after the workspace.
func defaultInitPath(ws, home string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if !sandbox.Covers(ws, wd) {
		return filepath.Join(wd, "tandem.yaml"), nil
	}
	cfgHome := os.Getenv("XDG_CONFIG_HOME")
	if cfgHome == "" || !filepath.IsAbs(cfgHome) {
		if home == "" {
			return "", errors.New("no home directory for ~/.config/tandem: pass --output with a path outside the workspace")
		}
		cfgHome = filepath.Join(home, ".config")
	}
	return filepath.Join(cfgHome, "tandem", filepath.Base(ws)+".yaml"), nil
}

// shellWord quotes s for a POSIX shell where it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " '\"\\`*?;&|<>(){}[]#~!\t\n") {
		return s
	}
	if strings.HasPrefix(s, "$HOME/") && !strings.ContainsAny(s[6:], " '\"\\`$") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// starterConfig is the file tandem init writes for the workspace ws.
func starterConfig(ws string) string {
	return `# tandem.yaml, written by tandem init. Every key is explained in the README's
# "tandem.yaml reference"; tandem serve --config THIS-FILE checks it at start
# and lists every mistake at once.
#
# Keep this file outside the workspace below: a session can write everything
# in its workspace, and tandem refuses to start on a config it could rewrite.

targets:
  - name: local              # what the agent passes as "target" to ssh_connect
    kind: local              # a shell on this machine, in the Landlock sandbox
    workspace: ` + yamlScalar(ws) + `
                             # the one directory sessions may write
                             # (serve --workspace DIR points this target elsewhere)
    network: false           # no network: the session's own loopback only.
                             # For package registries: network: {allow: ["preset:npm", "preset:go", "pypi.org"]}
    # readOnly: [~/.bashrc, ~/.gitconfig]   # more files the sandbox may read

# What runs unwatched and what waits for a person (the dashboard, or the
# agent's client where it can ask). Rules match commands as parsed by a
# shell, wrappers such as sudo or bash -c seen through; the strictest
# matching rule wins; mode applies when none matches.
policy:
  mode: allow
  rules:
    - {command: "git push *", decision: ask}
    - {command: "rm -rf *", decision: ask}
    - {command: "rm -fr *", decision: ask}
    - {command: "npm publish *", decision: ask}
    - {command: "pnpm publish *", decision: ask}
    - {command: "yarn publish *", decision: ask}
    - {command: "cargo publish *", decision: ask}
    - {command: "twine upload *", decision: ask}
    - {command: "poetry publish *", decision: ask}
    - {command: "gem push *", decision: ask}
    - {command: "docker push *", decision: ask}

# Secrets kept out of what the agent reads: the values of the project's .env
# (read in the workspace, and again whenever it changes; none while it is
# missing), and the built-in token patterns (on by default).
redact:
  secretFiles: [.env]
`
}

// yamlScalar writes s as a YAML double-quoted scalar when it needs quoting.
func yamlScalar(s string) string {
	if s != "" && !strings.ContainsAny(s, ":#'\"{}[],&*!|>%@`\\ \t") {
		return s
	}
	return fmt.Sprintf("%q", s)
}
