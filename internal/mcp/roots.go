//lint:file-ignore SA1019 MCP roots are deprecated by SEP-2577 (2026-07-28) but still work, and stdio clients on 2025-11-25 use them to name the workspace.

package mcp

import (
	"context"
	"encoding/json"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
)

// rootsChooser is implemented by Targets whose implicit workspace (tandem's
// current directory) the client's MCP roots may choose instead, over stdio.
type rootsChooser interface {
	WantsRoot(tenant, name string) bool
	LockRoot(dirs []string) (locked bool, dir string, err error)
}

// rootsWait bounds how long a connect waits for the client's roots.
const rootsWait = 5 * time.Second

// askRoots asks the client for its roots before the first connect to the
// implicit local target; the first answer locks that target's workspace.
// A client without roots, or one that does not answer, keeps tandem's
// current directory.
func (s *Server) askRoots(ctx context.Context, c session.Caller, target string) {
	rc, ok := s.deps.Targets.(rootsChooser)
	info := callFrom(ctx)
	if !ok || info.req == nil || !rc.WantsRoot(c.Tenant, target) {
		return
	}
	s.lockRoots(rc, clientRoots(ctx, info.req.Session, s))
}

// lockRoots locks the first roots answer and logs the outcome.
func (s *Server) lockRoots(rc rootsChooser, dirs []string) {
	if locked, dir, err := rc.LockRoot(dirs); locked {
		switch {
		case err != nil:
			s.log.Warn("the client's MCP roots name a workspace tandem refuses", "err", err)
		case dir != "":
			s.log.Info("workspace chosen by the client's MCP roots; later changes are ignored", "workspace", dir)
		}
	}
}

// clientRoots returns the local paths of the client's roots, in order,
// asking a client before protocol 2026-07-28 directly (newer ones answered
// through the call's input request already, see withRoots).
func clientRoots(ctx context.Context, ss *mcp.ServerSession, s *Server) []string {
	if !hasRoots(ss) || multiRoundTrip(ss) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, rootsWait)
	defer cancel()
	res, err := ss.ListRoots(ctx, nil)
	if err != nil {
		s.log.Warn("the client declared roots but did not list them; using tandem's current directory", "err", err)
		return nil
	}
	return rootPaths(res)
}

func hasRoots(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.RootsV2 != nil
}

// multiRoundTrip reports a client on protocol 2026-07-28 or later, which
// takes server requests only as a call's input requests (SEP-2322).
func multiRoundTrip(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= "2026-07-28"
}

// rootsInput names the roots request among a call's input requests.
const rootsInput = "tandem.roots"

// withRoots lets a connect to the implicit local target ask a 2026-07-28
// client for its roots the way that protocol allows: the first answer is
// an input request, and the client repeats the call with the roots.
func (s *Server) withRoots(next mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		rc, ok := s.deps.Targets.(rootsChooser)
		if !ok || claimOf(req.Extra) != nil || !multiRoundTrip(req.Session) {
			return next(ctx, req)
		}
		var a struct {
			Target string `json:"target"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &a)
		name := a.Target
		if name == "" {
			name, _ = s.deps.Targets.DefaultName(s.deps.Tenant, "")
		}
		if !rc.WantsRoot(s.deps.Tenant, name) {
			return next(ctx, req)
		}
		if !hasRoots(req.Session) {
			s.lockRoots(rc, nil)
			return next(ctx, req)
		}
		if res, ok := req.Params.InputResponses[rootsInput].(*mcp.ListRootsResult); ok {
			s.lockRoots(rc, rootPaths(res))
			return next(ctx, req)
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{rootsInput: &mcp.ListRootsParams{}}}, nil
	}
}

// rootPaths keeps the local directories of a roots answer, in order.
func rootPaths(res *mcp.ListRootsResult) []string {
	var dirs []string
	for _, r := range res.Roots {
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			continue
		}
		dirs = append(dirs, u.Path)
	}
	return dirs
}

// rootsChanged logs a client's new roots: the workspace, once chosen,
// does not move under a running agent.
func (s *Server) rootsChanged(context.Context, *mcp.RootsListChangedRequest) {
	s.log.Info("the client's MCP roots changed; the workspace chosen by its first answer stays")
}
