package main

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docLines returns a doc file's lines outside fenced code blocks, each
// with its 1-based line number.
func docLines(t *testing.T, file string) map[int]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	fence := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out[i+1] = line
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a file's headings.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	heading := regexp.MustCompile(`^#{1,6} (.*)$`)
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	anchors := map[string]bool{}
	for _, line := range docLines(t, file) {
		if m := heading.FindStringSubmatch(line); m != nil {
			a := strings.ToLower(strings.TrimSpace(m[1]))
			anchors[strings.ReplaceAll(drop.ReplaceAllString(a, ""), " ", "-")] = true
		}
	}
	return anchors
}

// TestDocsLinksResolve: every relative link and image of the README and
// docs/ names a file that exists, and an anchor that one of its headings
// gives, so a page moved or a heading renamed fails here.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	inline := regexp.MustCompile("`[^`]*`")
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, file := range docFiles(t) {
		for n, line := range docLines(t, file) {
			for _, m := range link.FindAllStringSubmatch(inline.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				p, anchor, _ := strings.Cut(target, "#")
				dest := file
				if p != "" {
					dest = path.Clean(path.Join(path.Dir(file), p))
					if _, err := os.Stat(filepath.Join("..", "..", dest)); err != nil {
						t.Errorf("%s:%d: %s: no such file %s", file, n, target, dest)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: %s: an anchor into a file that is not markdown", file, n, target)
					continue
				}
				if anchors[dest] == nil {
					anchors[dest] = headingAnchors(t, dest)
				}
				if !anchors[dest][anchor] {
					t.Errorf("%s:%d: %s: %s has no heading #%s", file, n, target, dest, anchor)
				}
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d links; the pattern lost some", checked)
	}
}

// TestREADMEFirstScreen: a newcomer finds, in the README's first 60 lines,
// the two commands (run tandem on its defaults, run the tests), the
// install and PATH lines, the client line, how to check it and the
// dashboard's link.
func TestREADMEFirstScreen(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	first := strings.Join(lines[:min(60, len(lines))], "\n")
	for _, want := range []string{
		"go run ./cmd/tandem serve",
		"make test",
		"go build -o ~/.local/bin/tandem ./cmd/tandem",
		"go install github.com/tandem-sh/tandem/cmd/tandem@latest",
		"export PATH=",
		"claude mcp add tandem -- ~/.local/bin/tandem serve --workspace",
		"claude mcp list",
		"tandem dashboard-url",
		"Apache",
	} {
		if want == "Apache" {
			first = string(b) // the licence is named at the end
		}
		if !strings.Contains(first, want) {
			t.Errorf("the README's first screen lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join("..", "..", "LICENSE")); err != nil {
		t.Errorf("no LICENSE file: %v", err)
	}
}

// TestDocsNoProjectHistory: the README and docs/ describe what tandem does,
// not how it came to: no line speaks of issue numbers, the seed, earlier
// builds, or work to come.
func TestDocsNoProjectHistory(t *testing.T) {
	history := regexp.MustCompile(`(?i)\bseed\b|\bas before\b|\bto come\b|\bAC ?\d|\bbuild before\b|\bwent from\b|` +
		`\bpreviously\b|\bused to (be|say|answer|print|run)\b|\bissue #?\d|\bturn[- ]\d|\bthe old (code|build|behaviou?r)\b`)
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d speaks of the project's history (%q): %s", file, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}
