package policy

import (
	"fmt"
	"path"
	"strings"
)

// File tools (ssh_upload, ssh_download, the monitoring page's uploads and
// downloads) are judged by the path of the file, relative to the
// session's workspace, against rules with a path glob:
//
//	{tool: ssh_upload, path: ".git/**", decision: deny}
//	{path: "**/*.pem", decision: ask}     # every file tool
//
// A glob is matched segment by segment with path.Match syntax (*, ?,
// [...]) where "**" stands for any number of segments, none included (so
// ".git/**" covers .git itself). A glob without a "/" matches the file's
// name at any depth ("*.pem"). As for commands, the strictest matching
// rule wins: path rules, and tool-only rules of the tool; with none, the
// mode. Command rules never judge a path, and path rules never judge a
// command.

// maxPathBytes bounds a judged path and a configured glob.
const maxPathBytes = 4096

// compileGlob checks a configured glob and splits it into segments.
func compileGlob(g string) ([]string, error) {
	switch {
	case g == "":
		return nil, fmt.Errorf("empty glob")
	case len(g) > maxPathBytes:
		return nil, fmt.Errorf("longer than %d bytes", maxPathBytes)
	case strings.HasPrefix(g, "/"):
		return nil, fmt.Errorf("%q is absolute: a path rule is relative to the workspace (e.g. \".git/**\")", g)
	}
	segs := strings.Split(path.Clean(g), "/")
	if !strings.Contains(g, "/") {
		segs = []string{"**", segs[0]}
	}
	for _, s := range segs {
		if s == ".." {
			return nil, fmt.Errorf("%q has \"..\": a path rule matches inside the workspace", g)
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", g, err)
		}
	}
	return segs, nil
}

// pathGlobMatch reports whether the segments of a path match those of a glob.
func pathGlobMatch(glob, segs []string) bool {
	if len(glob) == 0 {
		return len(segs) == 0
	}
	if glob[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if pathGlobMatch(glob[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, _ := path.Match(glob[0], segs[0])
	return ok && pathGlobMatch(glob[1:], segs[1:])
}

// decidePath judges a file tool on one path (relative to the workspace,
// clean, symlinks resolved by the caller).
func (p *Policy) decidePath(tool, file string) Verdict {
	if len(file) > maxPathBytes || path.IsAbs(file) || file == ".." || strings.HasPrefix(file, "../") {
		return p.failClosed(tool, fmt.Sprintf("the path %s is not one inside the workspace, so it is not judged", quoteShort(file)))
	}
	segs := strings.Split(path.Clean(file), "/")
	var best *rule
	for i := range p.rules {
		r := &p.rules[i]
		if r.pat != nil || (r.tool != "" && r.tool != tool) {
			continue
		}
		if r.glob == nil && r.tool == "" {
			continue
		}
		if r.glob != nil && !pathGlobMatch(r.glob, segs) {
			continue
		}
		if best == nil || r.dec > best.dec {
			best = r
		}
	}
	if best == nil {
		return Verdict{Decision: p.mode, Rule: "mode " + p.mode.String(), Reason: fmt.Sprintf("%s of %s matches no rule; mode is %s", quoteShort(tool), quoteShort(file), p.mode)}
	}
	if best.glob == nil {
		return Verdict{Decision: best.dec, Rule: best.text, Reason: fmt.Sprintf("tool %s matches %s (%s)", quoteShort(tool), best.ref, best.dec)}
	}
	return Verdict{Decision: best.dec, Rule: best.text, Reason: fmt.Sprintf("%s of %s matches %s (%s)", quoteShort(tool), quoteShort(file), best.ref, best.dec)}
}
