// Package mcp is tandem's MCP face: the tool definitions with their input
// and output schemas, strict argument decoding, caller identity, and the
// single mapping from errors to the stable {success:false, error, message}
// replies. It turns calls into session operations and knows nothing of how
// a shell is reached.
//
//	client ──tools/call──▶ decode args ──▶ caller ──▶ session.Lookup (token)
//	                                                 ──▶ gate ──▶ shell
//	reply ◀── JSON object as structuredContent and content[0].text
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/claim"
	"github.com/tandem-sh/tandem/internal/redact"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/target"
)

// Sessions is what the tools need of the session registry.
type Sessions interface {
	Create(ctx context.Context, c session.Caller, name string, t session.Target) (*session.Session, string, error)
	Lookup(c session.Caller, name, token string) (*session.Session, error)
	// LookupOutput is Lookup that also finds the caller's ended sessions
	// of this process, for reading back their output.
	LookupOutput(c session.Caller, name, token string) (*session.Session, error)
	List(c session.Caller) []session.Info
	Disconnect(s *session.Session) error
	EndOwner(c session.Caller)
}

// Auditor records tool calls durably: Append returns once committed.
type Auditor interface {
	Append(ctx context.Context, r audit.Record) (audit.Record, error)
	// Ready tells, within ctx, whether a record could be appended now.
	Ready(ctx context.Context) error
}

// Targets resolves where a new session runs.
type Targets interface {
	// DefaultName is the target of a connect that names none, for a caller
	// of tenant whose claim names workspace ("" over stdio).
	DefaultName(tenant, workspace string) (string, error)
	// Named resolves a target in the caller's scope; outside it, the error
	// is the one for a target that does not exist.
	Named(tenant, workspace, name string) (session.Target, error)
	AdHoc(tenant string, p target.SSH) (session.Target, error)
}

// Deps are the collaborators and limits of a Server.
type Deps struct {
	Sessions Sessions
	Targets  Targets
	// Audit, if set, receives one record per tool call.
	Audit Auditor
	// AuditContinue runs calls whose audit record cannot be written (the
	// reply carries auditError). By default such a call runs nothing and
	// answers audit_unavailable: what cannot be recorded does not happen.
	AuditContinue bool
	// MonitorURL turns a session's capability key into its browser URL.
	MonitorURL func(key string) string
	// Tenant names the tenant of stdio callers.
	Tenant string
	// KnownTenant says whether this tandem serves a tenant, for approvals
	// forwarded here; nil means only Tenant.
	KnownTenant func(tenant string) bool
	// RequireClaims refuses every call that carries no verified claim: set
	// in HTTP mode, where the claim is the only identity.
	RequireClaims bool
	// CommandTimeout is ssh_exec's default timeout.
	CommandTimeout time.Duration
	// InlineOutputBytes bounds the JSON size of all output inline in one
	// reply, every stream of every command in it together; 0 means no
	// bound. What does not fit is read back with ssh_read_output.
	InlineOutputBytes int
	// Heartbeat is the longest a client that asked for progress goes
	// without a notification while a command runs; zero means
	// DefaultHeartbeat.
	Heartbeat time.Duration
	Logger    *slog.Logger
	// Version is reported to clients.
	Version string
	// Policy returns the policy of a tenant's target (target "" for an
	// ad-hoc host); nil, or a nil Judge, allows everything.
	Policy func(tenant, target string) Policy
	// ExecJudging, if set, says whether this kernel can judge the programs
	// a local session starts (nil error) or why not; nil means
	// execguard.Available. A local session whose policy needs it is
	// refused when it cannot.
	ExecJudging func() error
	// Observer, if set, is told of every tool call and audit commit.
	Observer Observer
	// Elsewhere, if set, lists the caller's live sessions that other
	// nodes of a cluster hold, for ssh_list_sessions.
	Elsewhere func(ctx context.Context, c session.Caller) []session.Info
	// CommandRecorded, if set (a node of a cluster), waits until a finished
	// command's row is in the shared store. A reply that names an output
	// resource waits for it, so that the read can reach the session's node
	// from any node: the others route it by that row.
	CommandRecorded func(ctx context.Context, commandID string) error
	// Approvals holds the actions that wait for a human. Without it a
	// policy's ask is refused, as nobody could answer it.
	Approvals *approval.Broker
	// Denied, if set, is told of every action the policy refuses, for
	// the monitoring page's status strip.
	Denied func(act approval.Action, rule string)
	// Egress serves local targets with a network allowlist; without it
	// such a target's sessions are refused.
	Egress EgressProxy
	// Previews holds forwarded ports (ssh_forward_port); without it the
	// tool answers preview_unavailable.
	Previews Previews
	// UploadBytes and DownloadBytes bound one file of ssh_upload and
	// ssh_download; zero means DefaultTransferBytes.
	UploadBytes, DownloadBytes int64
}

// Observer is told of every tool call and its audit commit, for metrics;
// *metrics.Metrics implements it.
type Observer interface {
	ToolCall(tool, outcome string, took time.Duration)
	AuditAppend(took time.Duration, err error)
}

// Server is tandem's MCP server.
type Server struct {
	deps    Deps
	log     *slog.Logger
	sdkLog  *slog.Logger // the SDK's: warnings and errors only
	srv     *mcp.Server
	outputs *outputs
	// inflight tracks the tool calls served over HTTP (HTTPHandler).
	inflight *inflight

	// held routes the held asks of running commands to the agent's
	// client or an upstream (held.go).
	held heldClients

	// downloads are the files ssh_download named as resources
	// (transferres.go).
	downloads downloads

	mu      sync.Mutex
	callers map[*mcp.ServerSession]string
	stashes map[*mcp.ServerSession]*stash // connections Run serves
}

// New builds the MCP server with every tool registered.
func New(d Deps) *Server {
	s := &Server{deps: d, log: d.Logger, callers: map[*mcp.ServerSession]string{}, stashes: map[*mcp.ServerSession]*stash{},
		inflight: newInflight()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.deps.Tenant == "" {
		s.deps.Tenant = "default"
	}
	s.outputs = &outputs{m: map[string]storedOutput{}}
	s.sdkLog = slog.New(quieter{s.log.Handler(), slog.LevelWarn})
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "tandem", Version: d.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		// The SDK logs every connection at info: in HTTP mode that is every
		// request. Its warnings and errors still show.
		Logger: s.sdkLog,
		//lint:ignore SA1019 roots still work through SEP-2577's deprecation window; see roots.go.
		RootsListChangedHandler: s.rootsChanged,
	})
	s.srv.AddReceivingMiddleware(s.encodeOnce, onlyAllowedTools)
	s.register()
	return s
}

// quieter passes on records at min or above only.
type quieter struct {
	slog.Handler
	min slog.Level
}

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= q.min && q.Handler.Enabled(ctx, l)
}

func (q quieter) WithAttrs(as []slog.Attr) slog.Handler {
	return quieter{q.Handler.WithAttrs(as), q.min}
}

func (q quieter) WithGroup(name string) slog.Handler {
	return quieter{q.Handler.WithGroup(name), q.min}
}

const instructions = `tandem gives you shell sessions that a human can watch and type into. ` +
	`Call ssh_connect once to get a sessionToken, then pass sessionName and sessionToken to every other tool. ` +
	`If the human ran commands since your last call, your next call is refused once with user_activity_detected ` +
	`and the full list of what they ran: read it, then retry.`

func (s *Server) heartbeat() time.Duration {
	if s.deps.Heartbeat > 0 {
		return s.deps.Heartbeat
	}
	return DefaultHeartbeat
}

// MCP returns the underlying go-sdk server, to run on a transport.
func (s *Server) MCP() *mcp.Server { return s.srv }

// call is what one tool call learns about itself for its audit record.
type call struct {
	req        *mcp.CallToolRequest
	claims     *claim.Claims // nil over stdio
	workspace  string        // the local session's directory, if any
	sessionID  string
	session    string
	target     string
	exit       *int
	bytes      int64
	decoded    bool          // the arguments passed strict decoding
	budget     time.Duration // the call's own timeout: no audit wait exceeds it
	skipAudit  bool          // the audit log was found unwritable before the call
	rule       string        // the policy rule that decided, if a policy applied
	blocked    string        // the programs the command was refused (blockedReason), if any
	approvalID string        // the approval the call needed, if any
	// input, if set, is the call's answer instead of its reply: requests
	// for the client (protocol 2026-07-28), which repeats the call.
	input mcp.InputRequestMap
	// requestState goes with input, for the repeated call.
	requestState string
	// raw, if set, is sent instead of the reply's usual rendering: a
	// result in another program's shape (permissions__approve).
	raw *mcp.CallToolResult
	// maskInput keeps the input argument out of the audit: keys typed
	// where the terminal does not echo them (a password prompt).
	maskInput bool
	// auditInput, if set, is the input argument as the audit keeps it:
	// redacted with the session's redactor, like output.
	auditInput *string
	// commandID is the command the call ran, if any: an interrupted or
	// timed-out call's audit record names it, for reading it back.
	commandID string
	// redact is the redactor of the session the call touched, for
	// everything its reply carries (redactReply); nil: none.
	redact *redact.Redactor
	// sess is the session the call named, once its caller and token
	// checked out: its reply tells what viewers did to the agent's
	// commands (addTouches).
	sess *session.Session
	// content, if set, follows the reply's JSON in a successful result:
	// a downloaded image, a link to a downloaded file (transfer.go).
	content []mcp.Content
	// argsAudit, if set, is what the audit keeps of the arguments instead
	// of them: an upload's path and size, never its content.
	argsAudit json.RawMessage
}

// timeouter is implemented by arguments that carry their own timeout.
type timeouter interface{ callTimeout() time.Duration }

// auditWaitMax bounds any wait for the audit log, whatever the call's timeout.
const auditWaitMax = 10 * time.Second

// auditReady checks, within the call's budget, that its record can be
// written; with audit.onFailure: continue it always passes.
func (s *Server) auditReady(ctx context.Context, budget time.Duration) error {
	if s.deps.Audit == nil || s.deps.AuditContinue {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, min(max(budget, time.Second), auditWaitMax))
	defer cancel()
	return s.deps.Audit.Ready(ctx)
}

// Ready reports whether calls can be served now: the audit log takes
// records (or the config lets calls run without it). For /readyz.
func (s *Server) Ready(ctx context.Context) error {
	if s.deps.Audit == nil || s.deps.AuditContinue {
		return nil
	}
	return s.deps.Audit.Ready(ctx)
}

type callKey struct{}

func callFrom(ctx context.Context) *call {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c
	}
	return &call{}
}

// serverSession is the connection the call came on, if any.
func (c *call) serverSession() *mcp.ServerSession {
	if c.req == nil {
		return nil
	}
	return c.req.Session
}

// noteSession records which session a call touched.
func noteSession(ctx context.Context, sess *session.Session) {
	c := callFrom(ctx)
	c.sessionID, c.session, c.target, c.workspace = sess.ID, sess.Name, sess.Target.Name, sess.Target.Workspace
	c.redact = sess.Target.Redact
	c.sess = sess
}

// redactText is t with the secrets of the session the call touched
// replaced by markers: a text for the agent built outside its reply.
func (c *call) redactText(t string) string {
	if c.redact == nil {
		return t
	}
	t, _ = c.redact.String(t)
	return t
}

// handler adapts one tool: decode, run, audit, render. The audit record is
// committed before the reply is sent, and no panic escapes.
func handler[A any](s *Server, name string, run func(ctx context.Context, c session.Caller, a A) (reply, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		start := time.Now()
		if done := callDone(req.Extra); done != nil {
			// Over HTTP the call ends when its client cancels it or goes.
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			defer stop()
			defer context.AfterFunc(done, stop)()
		}
		c, claims, idErr := s.identify(req.Session, req.Extra)
		info := &call{req: req, claims: claims}
		ctx = context.WithValue(ctx, callKey{}, info)
		var r reply
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
				r = fail(codeInternal, "tandem hit an internal error running "+name+"; nothing else was affected. Please report this.", nil).reply()
			}
			s.addTouches(ctx, c, info, r)
			addUserFiles(info, r)
			s.audit(ctx, c, name, info, r, start)
			r = redactReply(info.redact, r)
			res, err = result(r), nil
			if r["success"] == true {
				res.Content = append(res.Content, info.content...)
			}
			switch {
			case info.input != nil:
				res = &mcp.CallToolResult{InputRequests: info.input, RequestState: info.requestState}
			case info.raw != nil:
				res = info.raw
			case name == permissionsTool && r["success"] != true:
				res = claudeFailure(r)
			}
		}()
		switch {
		case idErr != nil:
			r = fail(codeUnauthenticated, "This call carries no verified claim; send your bearer token in the Authorization header.", nil).reply()
			return
		case claims != nil && !claims.Allows(name):
			r = fail(codeToolNotAllowed, "Your token does not allow "+name+". Ask whoever issued it for a token whose tools include it.", reply{"tool": name}).reply()
			return
		}
		var a A
		if decodeErr := decodeArgs(req.Params.Arguments, &a); decodeErr != nil {
			r = s.failure(c, decodeErr).reply()
			return
		}
		info.decoded = true
		info.budget = s.deps.CommandTimeout
		if t, ok := any(a).(timeouter); ok && t.callTimeout() > 0 {
			info.budget = t.callTimeout()
		}
		if auditErr := s.auditReady(ctx, info.budget); auditErr != nil && ctx.Err() != nil {
			// The client cancelled while the call waited for the audit log:
			// the log is not the trouble, and nothing ran.
			r = fail(codeCancelled, "The call was cancelled by the client before anything ran.", nil).reply()
			return
		} else if auditErr != nil {
			s.log.Error("audit log unavailable; refusing the call", "tool", name, "err", auditErr)
			info.skipAudit = true
			if errors.Is(auditErr, store.ErrSharedUnavailable) {
				r = storeUnavailable(auditErr).reply()
				return
			}
			r = fail(codeAuditUnavailable, "The audit log cannot be written right now ("+auditErr.Error()+"), and tandem runs nothing it cannot record. Retry shortly; if it persists, check the data dir's disk and whether another process holds tandem.db locked.", nil).reply()
			return
		}
		out, runErr := run(ctx, c, a)
		if runErr != nil {
			r = s.failure(c, runErr).reply()
			return
		}
		if info.approvalID != "" {
			out["approvalId"] = info.approvalID
		}
		r = out
		return
	}
}

// audit appends the call's record. If that fails the reply says so: the
// action has happened, and hiding its result would not undo it.
func (s *Server) audit(ctx context.Context, c session.Caller, tool string, info *call, r reply, start time.Time) {
	outcome, _ := r["error"].(string)
	event := "tool_call"
	switch outcome {
	case "":
		outcome = "ok"
	case codeInvalidToken:
		event = "token_refused"
	case codeUserActivity:
		event = "gate_tripped"
	}
	if info.session == "" && info.req != nil {
		var named struct {
			SessionName string `json:"sessionName"`
			Name        string `json:"name"`
		}
		_ = json.Unmarshal(info.req.Params.Arguments, &named)
		info.session = named.SessionName + named.Name
	}
	s.log.Debug("tool call", "tool", tool, "ms", time.Since(start).Milliseconds(), "outcome", outcome)
	if o := s.deps.Observer; o != nil {
		defer func() { o.ToolCall(tool, outcome, time.Since(start)) }()
	}
	if s.deps.Audit == nil || info.skipAudit {
		return
	}
	var args json.RawMessage
	if info.req != nil {
		args = info.argsAudit // an upload's content is not even parsed for the audit
		if args == nil {
			args = auditArgs(info.req.Params.Arguments, info.decoded)
		}
		if info.maskInput {
			args = maskInput(args)
		} else if info.auditInput != nil {
			args = withInput(args, *info.auditInput)
		}
		if info.sess != nil {
			args = auditHeld(info.sess.Target.RedactHeld, args)
		}
	}
	rec := audit.Record{
		Time: start, Tenant: c.Tenant, Actor: s.auditActor(c), SessionID: info.sessionID, SessionName: info.session,
		Target: info.target, Tool: tool, Event: event, Args: args, Outcome: outcome,
		ExitCode: info.exit, DurationMs: time.Since(start).Milliseconds(), Bytes: info.bytes,
		Workspace: info.workspace, ApprovalID: info.approvalID,
	}
	switch {
	case info.rule != "" && outcome != "ok":
		rec.Reason = "policy: " + info.rule
	case info.blocked != "":
		rec.Reason = info.blocked
	case info.commandID != "" && (outcome == codeCancelled || outcome == codeTimeout):
		rec.Reason = "command " + info.commandID + ": " + map[string]string{
			codeCancelled: "interrupted, the client cancelled the call",
			codeTimeout:   "still running after the call's timeout",
		}[outcome]
		switch {
		case outcome != codeTimeout:
		case r["waitingForInput"] == true:
			rec.Reason = "command " + info.commandID + ": still running, waiting for input on its terminal"
		case r["fullScreen"] == true:
			rec.Reason = "command " + info.commandID + ": still running, a full-screen program shows"
		}
	}
	if cl := info.claims; cl != nil {
		rec.Actor, rec.SID, rec.JTI, rec.ClaimFingerprint = cl.Actor, cl.SID, cl.JTI, cl.Fingerprint
		rec.Workspace = scopeDesc(cl.Workspace, info.workspace)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(max(info.budget, time.Second), auditWaitMax))
	defer cancel()
	appendStart := time.Now()
	_, err := s.deps.Audit.Append(actx, rec)
	if o := s.deps.Observer; o != nil {
		o.AuditAppend(time.Since(appendStart), err)
	}
	if err != nil {
		s.log.Error("audit append failed", "tool", tool, "err", err)
		r["auditError"] = "this call could not be written to the audit log: " + err.Error()
	}
}

// scopeDesc names the resolved workspace in the audit: the claim's
// workspace name and the directory it resolved to, as far as known.
func scopeDesc(name, dir string) string {
	switch {
	case name == "":
		return dir
	case dir == "":
		return name
	}
	return name + ":" + dir
}

// toolSpec is one tool's metadata: what a client shows and how it may
// treat the tool.
type toolSpec struct {
	name, title, desc string
	in                json.RawMessage
	out               schema
	readOnly          bool
	destructive       bool
	// plain tools declare no output schema: their reply is not tandem's.
	plain   bool
	handler mcp.ToolHandler
}

func (s *Server) register() {
	yes, no := true, false
	for _, t := range append([]toolSpec{
		{name: "ssh_connect", title: "Open a shell session", in: connectSchema,
			desc: "Start a shell session on a configured target (or, where allowed, an SSH host) and get its sessionToken and the monitoringUrl where a human can watch it (and type into it, signed in as tandem's operator).",
			out: schema{"connection": connectionSchema, "sessionToken": typed("string", "Pass to every other tool; shown only once."),
				"monitoringUrl": typed("string", "The browser URL where a human can watch the session, and type into it once signed in as tandem's operator; give it to the human. The URL alone lets a browser watch, never type."),
				"workspace":     typed("string", "A local session's read-write directory."),
				"loginStartMs":  typed("integer", "How long the shell took from its start to its first prompt, in ms: mostly the login's own startup files (~/.bashrc); over 1000 the message says so."),
				"sandbox":       sandboxSchema},
			handler: s.withRoots(handler(s, "ssh_connect", s.connect))},
		{name: "ssh_exec", title: "Run a command", in: execSchema, destructive: true,
			desc:    "Run a command in the session's shared shell (cd, export and venvs persist). Returns stdout, stderr, exitCode, durationMs and cwd; large output comes as head and tail, the rest readable with ssh_read_output. Refused once with user_activity_detected if the human ran commands since your last call.",
			out:     schema{"result": resultSchema},
			handler: handler(s, "ssh_exec", s.exec)},
		{name: "ssh_read_output", title: "Read a command's output", in: readOutputSchema, readOnly: true,
			desc: "Read any command's complete output by commandId, the agent's or the human's: a byte range (offset may be negative, from the end; encoding \"base64\" for the exact bytes), or the lines matching an RE2 pattern with their line numbers and, on request, context lines. Follow nextOffset to continue. stream \"command\" reads the command line itself, whole where a reply cut it (commandTruncated). Also reports a command that outlived its call: running, then exitCode and durationMs. Read-only: it does not touch the user-activity gate.",
			out: schema{
				"stream":     typed("string", "stdout, stderr or command."),
				"offset":     typed("integer", "The byte offset the data starts at; with grep, where the search started."),
				"bytes":      typed("integer", "How many bytes of the stream data holds."),
				"totalBytes": typed("integer", "The stream's size so far."),
				"redacted":   typed("integer", "Present when tandem replaced secrets in the stream (redact in tandem.yaml): how many so far, each shown as [REDACTED:kind] in data and offsets counting the markers."),
				"eof":        typed("boolean", "True when data (or the search) reaches the end of a command that has ended."),
				"nextOffset": typed("integer", "Present when the read or search stopped before the end of what exists: pass it as offset to continue."),
				"data":       typed("string", "The bytes read, as text (bytes that are not UTF-8 shown as U+FFFD, with lossy), or base64 with encoding."),
				"encoding":   schema{"type": "string", "enum": []string{"base64"}, "description": "Present when data is the exact bytes in base64: asked for, or mostly binary (a NUL byte, or more than a quarter of them neither UTF-8 nor text control characters)."},
				"lossy":      typed("boolean", "Present (true) when bytes of data that are not UTF-8 were replaced by U+FFFD, one per byte; encoding \"base64\" returns them exactly."),
				"durationMs": typed("integer", "How long the command ran, once it has ended."),
				"interruptedBy": schema{"type": "string", "enum": []string{"human", "agent"},
					"description": "Present when the command was interrupted: \"human\" (a key typed in the terminal) or \"agent\" (ssh_cancel, or a cancelled call)."},
				"interruptKey":    typed("string", "The key that interrupted it: Ctrl-C, Ctrl-Z or Ctrl-\\."),
				"interruptSignal": schema{"type": "string", "enum": []string{"SIGTERM", "SIGKILL"}, "description": "When Ctrl-C was not enough: the signal that ended it."},
				"interruptViewer": typed("string", "Who pressed the key, when a human did."),
				"matches": arrayOf("With grep: the matching lines and their context lines, in order, each line once.", object("One line.", schema{
					"line":        typed("integer", "Its line number, from 1 at the start of the stream."),
					"offset":      typed("integer", "The byte offset where it starts."),
					"match":       typed("boolean", "Present (true) when the line matches; a context line has none."),
					"text":        typed("string", "The line, without its line end (bytes that are not UTF-8 shown as U+FFFD, with lossy); for a line over 4 KiB, an excerpt."),
					"lossy":       typed("boolean", "Present (true) when bytes of text that are not UTF-8 were replaced by U+FFFD."),
					"excerpt":     typed("boolean", "Present (true) when the line is over 4 KiB and text is 2 KiB of it: around its first match, or its start for a context line."),
					"lineBytes":   typed("integer", "With excerpt: the line's length in bytes, without its line end."),
					"textOffset":  typed("integer", "With excerpt: the byte offset in the stream where text starts."),
					"matchOffset": typed("integer", "With excerpt, on a match: the byte offset in the stream where the first match starts; read the exact bytes there with offset and maxBytes."),
				})),
				"unsearched": arrayOf("With grep: lines over 16 MiB, of which only the first 16 MiB were searched.", object("One such line.", schema{
					"line":      typed("integer", "Its line number."),
					"offset":    typed("integer", "The byte offset where it starts."),
					"lineBytes": typed("integer", "Its length in bytes."),
				})),
			},
			handler: handler(s, "ssh_read_output", s.readOutput)},
		{name: "ssh_send_input", title: "Answer your running command", in: sendInputSchema, destructive: true,
			desc: "Send keys to your own running command: an answer at a prompt (read -p, rm -i, [Y/n], a password), a line for a REPL. submit adds Enter. What the command leaves unread when it ends is discarded, never run at the prompt; Ctrl-C, Ctrl-Z and Ctrl-\\ are refused while the terminal turns them into signals (use ssh_cancel). Returns what the command did next: the output since (stdoutOffset on), or its result if it ended, and whether it waits for input again.",
			out: schema{"result": resultSchema, "bytesSent": typed("integer", "How many bytes were typed."),
				"echoed":       typed("boolean", "Whether the terminal showed the keys (false at a password prompt; absent where tandem cannot tell). The audit keeps the keys, redacted like output, except where the terminal hid them or tandem cannot tell."),
				"stdout":       typed("string", "While it runs: its output since the keys (stdoutNextOffset when there is more)."),
				"stderr":       typed("string", "While it runs: its stderr since the keys."),
				"stdoutOffset": typed("integer", "Where stdout since the keys starts in the stream."), "stderrOffset": typed("integer", "Where stderr since the keys starts."),
				"stdoutNextOffset": typed("integer", "Where the rest of stdout starts, for ssh_read_output."), "stderrNextOffset": typed("integer", "Where the rest of stderr starts.")},
			handler: handler(s, "ssh_send_input", s.sendInput)},
		{name: "ssh_list_sessions", title: "List sessions", in: emptySchema, readOnly: true,
			desc: "List your own sessions (never tokens).",
			out:  schema{"sessions": arrayOf("Your live sessions, oldest first.", connectionSchema)},
			handler: handler(s, "ssh_list_sessions", func(ctx context.Context, c session.Caller, _ struct{}) (reply, error) {
				return s.list(ctx, c), nil
			})},
		{name: "ssh_disconnect", title: "End a session", in: sessionSchema, destructive: true,
			desc:    "End the session: its shell and processes stop.",
			out:     schema{},
			handler: handler(s, "ssh_disconnect", s.disconnect)},
		{name: "ssh_get_monitoring_url", title: "Get the monitoring URL", in: sessionSchema, readOnly: true,
			desc: "Get the browser URL where a human can watch the session (and type into it, signed in as tandem's operator).",
			out: schema{"sessionName": typed("string", "The session."),
				"monitoringUrl": typed("string", "The browser URL; give it to the human.")},
			handler: handler(s, "ssh_get_monitoring_url", s.monitoringURL)},
		{name: "ssh_forward_port", title: "Preview a port in the browser", in: forwardPortSchema,
			desc:    "Make a browser URL for a port your server listens on in the session (a dev server on 127.0.0.1:3000): HTTP and WebSocket reach it, redirects stay within the preview. Give url to the human: it opens for tandem's signed-in operator or a viewer they admitted, never with the monitoring link alone. Forwarding the same port again returns the same url; forwards end with the session.",
			out:     forwardPortOut,
			handler: handler(s, "ssh_forward_port", s.forwardPort)},
		{name: "ssh_list_ports", title: "List forwarded ports", in: sessionSchema, readOnly: true,
			desc:    "List the session's forwarded ports and their URLs. Read-only: it does not touch the user-activity gate.",
			out:     schema{"ports": arrayOf("The forwarded ports, in the order opened.", forwardedPortSchema)},
			handler: handler(s, "ssh_list_ports", s.listPorts)},
		{name: "ssh_cancel", title: "Interrupt the running command", in: sessionSchema, destructive: true,
			desc:    "Interrupt your running command: Ctrl-C, then SIGTERM and SIGKILL after a grace period.",
			out:     schema{"result": resultSchema},
			handler: handler(s, "ssh_cancel", s.cancel)},
		{name: "ssh_request_human", title: "Hand the session to the human", in: requestHumanSchema,
			desc: "Ask for the human at the keyboard when you need what only they can give: a password (sudo), a 2FA code, an interactive login, a judgement call. The monitoring page shows your message; the session is theirs until they click \"Done, hand back\" (your calls that act on it answer session_busy meanwhile). Waits up to waitSeconds, then answers human_pending with a requestId to call again with. The answer carries the human's note and every command they ran meanwhile (what they typed at a prompt that does not echo is never recorded).",
			out: schema{"requestId": typed("string", "The request."),
				"note":             typed("string", "What the human told you when they handed back, if anything."),
				"handedBackBy":     typed("string", "Who handed back (the viewer)."),
				"handedBackAt":     typed("string", "When (RFC 3339)."),
				"userCommandCount": typed("integer", "How many commands the human ran while the session was theirs; they are listed as user_activity_detected lists them.")},
			handler: handler(s, "ssh_request_human", s.requestHuman)},
		{name: permissionsTool, title: "Approve a Claude Code tool use", in: approveSchema, plain: true,
			desc:    "For Claude Code's --permission-prompt-tool: decides whether Claude Code may use one of its own tools (Bash commands are parsed as ssh_exec's are), by tandem's policy and, where it asks, a human. Answers one text content: {\"behavior\":\"allow\",\"updatedInput\":…} or {\"behavior\":\"deny\",\"message\":…}.",
			handler: handler(s, permissionsTool, s.approvePermission)},
	}, s.transferTools()...) {
		ann := &mcp.ToolAnnotations{Title: t.title, ReadOnlyHint: t.readOnly, OpenWorldHint: &yes}
		if !t.readOnly {
			ann.DestructiveHint = &no
			if t.destructive {
				ann.DestructiveHint = &yes
			}
		}
		tool := &mcp.Tool{Name: t.name, Title: t.title, Description: t.desc, Annotations: ann, InputSchema: t.in}
		if !t.plain {
			tool.OutputSchema = outputSchema(t.out)
		}
		s.srv.AddTool(tool, t.handler)
	}
	s.srv.AddResourceTemplate(fileTemplate, s.readFile)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "command-output", URITemplate: outputURIPrefix + "{commandId}/{stream}{?page}", MIMEType: "text/plain",
		Description: "The complete stdout or stderr of a command whose output was too large to send inline. Add ?page=N for page N.",
	}, s.readResource)
}
