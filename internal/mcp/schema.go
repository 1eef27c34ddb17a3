package mcp

import "encoding/json"

// The tools' input and output schemas, built from small parts so that the
// same field is described the same way everywhere. Output schemas list
// every field tandem can send, errors' included; they stay open
// (additional properties allowed) so that a client validating strictly is
// never broken by a field added later. The golden tests close them to
// check that nothing sent is undocumented.

type schema = map[string]any

func typed(t, desc string) schema { return schema{"type": t, "description": desc} }

func object(desc string, props schema, required ...string) schema {
	s := schema{"type": "object", "description": desc, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func arrayOf(desc string, items schema) schema {
	return schema{"type": "array", "description": desc, "items": items}
}

func nullable(t, desc string) schema {
	return schema{"type": []string{t, "null"}, "description": desc}
}

func merge(parts ...schema) schema {
	out := schema{}
	for _, p := range parts {
		for k, v := range p {
			out[k] = v
		}
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the schemas are constants: this is a programming error
	}
	return b
}

// streamFields describes one output stream as a reply carries it: whole,
// or cut to head and tail with its size and where to read the rest. Each
// of the two strings may carry the flags that say how it was sent.
func streamFields(name string) schema {
	s := schema{
		name:               typed("string", "The "+name+" output, as text: bytes that are not UTF-8 show as U+FFFD ("+name+"Lossy), a progress bar's redraws as the frame last shown ("+name+"FramesCollapsed); base64 instead when the bytes are mostly binary ("+name+"Encoding). When "+name+"Truncated: the stream's first bytes, ending on a line when one ends within 1 KiB of the cut."),
		name + "Tail":      typed("string", "When "+name+"Truncated: the stream's last bytes, at least as many as the head's, starting on a line when one starts within 1 KiB of the cut; sent as "+name+" is ("+name+"TailLossy, "+name+"TailFramesCollapsed, "+name+"TailEncoding)."),
		name + "Bytes":     typed("integer", "When "+name+"Truncated: the stream's total size in bytes."),
		name + "Truncated": typed("boolean", "True when the stream did not fit the reply's inline budget; read the rest with ssh_read_output."),
		name + "Resource": object("When "+name+"Truncated: the whole stream as an MCP resource.", schema{
			"uri":       typed("string", "Resource URI; add ?page=N for page N (from 0)."),
			"bytes":     typed("integer", "Total size in bytes."),
			"pageBytes": typed("integer", "Size of one page."),
			"pages":     typed("integer", "Number of pages."),
		}),
		name + "Error":    typed("string", "Present when tandem could not keep every byte (a full disk): how much is missing."),
		name + "Redacted": typed("integer", "Present when tandem replaced secrets in "+name+" (a token, a password, a value of a secret file; redact in tandem.yaml): how many, each shown as [REDACTED:kind]. ssh_read_output and the output resources hold the same markers."),
	}
	for _, f := range []string{name, name + "Tail"} {
		s[f+"Encoding"] = schema{"type": "string", "enum": []string{"base64"}, "description": "Present when " + f + " is the exact bytes in base64: they are mostly binary (a NUL byte, or more than a quarter of them neither UTF-8 nor text control characters)."}
		s[f+"Lossy"] = typed("boolean", "Present (true) when bytes of "+f+" that are not UTF-8 were replaced by U+FFFD, one per byte; ssh_read_output with encoding \"base64\" returns the exact bytes.")
		s[f+"FramesCollapsed"] = typed("integer", "Present when lines of "+f+" were redrawn in place (a carriage return not followed by a line feed, as progress bars do): how many frames were left out, each line showing its last. The stream and ssh_read_output keep every byte.")
	}
	return s
}

var resultSchema = object("The command's result. Output streams share one inline budget (limits.inlineOutputBytes).",
	merge(schema{
		"exitCode":   nullable("integer", "The exit status; null when the shell could not report one."),
		"durationMs": typed("integer", "How long the command ran, in milliseconds."),
		"cwd":        typed("string", "The shell's working directory after the command."),
		"interruptedBy": schema{"type": "string", "enum": []string{"human", "agent"},
			"description": "Present when the command was interrupted: \"human\" (a key typed in the terminal) or \"agent\" (ssh_cancel, or a cancelled call)."},
		"interruptKey":    typed("string", "The key that interrupted it: Ctrl-C, Ctrl-Z or Ctrl-\\."),
		"interruptSignal": schema{"type": "string", "enum": []string{"SIGTERM", "SIGKILL"}, "description": "When Ctrl-C was not enough: the signal that ended it."},
		"interruptViewer": typed("string", "Who pressed the key, when a human did."),
		"shellRepaired":   arrayOf("What the command broke of tandem's shell integration, which tandem put back before the next command: prompt_command, history, emacs, vi, monitor, histexpand, interactive_comments.", typed("string", "One repair.")),
		"blocked": arrayOf("Local sessions: the programs the command started that the policy refused (each failed with \"Operation not permitted\"), the first 1,000.", object("One refused program.", schema{
			"argv":          arrayOf("Its argument vector as the program would have received it.", typed("string", "One word.")),
			"argvTruncated": typed("boolean", "Present (true) when argv was too long to read whole."),
			"cwd":           typed("string", "The directory it was started in."),
			"rule":          typed("string", "The rule that refused it, as configured."),
			"decision":      schema{"type": "string", "enum": []string{"deny", "denied"}, "description": "deny: a deny rule; denied: a human denied it."},
		})),
		"networkRefused": arrayOf("A target with a network allowlist: the connections the command's programs were refused (the first 20), with why: for HTTPS the program itself sees only the proxy's 403.", object("One refused connection.", schema{
			"host":      typed("string", "The host name or address asked for."),
			"port":      typed("integer", "The port."),
			"reason":    typed("string", "Why: the allowlist's refusal, or a human's denial with their own words."),
			"decidedBy": typed("string", "allowlist (the allowlist or the proxy's own rules), or who denied an ask: dashboard, client, upstream, timeout; nobody when the program stopped waiting first."),
			"method":    typed("string", "On an inspected connection: the refused request's method."),
			"path":      typed("string", "On an inspected connection: the refused request's path."),
			"inspected": typed("boolean", "True when the proxy judged a request inside the connection's TLS."),
		})),
		"connections": arrayOf("A target with a network allowlist: what the command's programs connected to through the proxy (the first 20).", object("One connection.", schema{
			"host":       typed("string", "The host name or address asked for."),
			"port":       typed("integer", "The port."),
			"address":    typed("string", "The address the proxy connected to."),
			"decision":   schema{"type": "string", "enum": []string{"allowed", "approved"}, "description": "allowed: by the allowlist; approved: by a human."},
			"bytesUp":    typed("integer", "Bytes sent to the host."),
			"bytesDown":  typed("integer", "Bytes received from it."),
			"open":       typed("boolean", "True when still open as the reply was made (a background job's)."),
			"durationMs": typed("integer", "Once ended: how long it was open, in milliseconds."),
			"inspected":  typed("boolean", "True when the proxy terminated the connection's TLS (with the session's CA) to judge each request or add a credential."),
			"credential": typed("string", "The names of the network.credentials the proxy adds on this connection (never their values)."),
		})),
	}, streamFields("stdout"), streamFields("stderr")))

var userCommandSchema = object("A command the human ran in the browser terminal.",
	merge(schema{
		"commandId":        typed("string", "Pass to ssh_read_output to read this command's whole output."),
		"command":          typed("string", "The command line the human ran; a multi-line buffer (a paste) gives every line it ran."),
		"commandTruncated": typed("boolean", "True when command was cut to fit the reply; ssh_read_output {commandId, stream: \"command\"} reads it whole."),
		"commandBytes":     typed("integer", "When commandTruncated: the command line's whole size."),
		"viewer":           typed("string", "Who typed it (a browser viewer, tandem attach)."),
		"shellRepaired":    arrayOf("What the command broke of tandem's shell integration, which tandem put back: prompt_command, history, emacs, vi, monitor.", typed("string", "One repair.")),
		"unattributed":     typed("boolean", "True when the shell ran it but no viewer's keystroke explains it (input tandem could not follow, or a program printing shell-integration marks)."),
		"exitCode":         nullable("integer", "Its exit status; null when unknown."),
		"duration":         typed("integer", "How long it ran, in milliseconds."),
		"timestamp":        typed("string", "When it started (RFC 3339)."),
		"cwd":              typed("string", "The working directory after it."),
		"streams":          schema{"type": "string", "enum": []string{"merged"}, "description": "\"merged\": a terminal has one output, so stderr is inside stdout."},
	}, streamFields("stdout"), streamFields("stderr")))

var connectionSchema = object("The session.", schema{
	"name":         typed("string", "The session name."),
	"target":       typed("string", "The configured target name; empty for an ad-hoc SSH host."),
	"host":         typed("string", "The host the shell runs on."),
	"port":         typed("integer", "The SSH port; 0 for a local session."),
	"username":     typed("string", "The login; empty for a local session."),
	"kind":         schema{"type": "string", "enum": []string{"ssh", "local"}, "description": "ssh or local."},
	"status":       schema{"type": "string", "enum": []string{"active", "ended"}, "description": "active or ended."},
	"createdAt":    typed("string", "When the session started (RFC 3339)."),
	"lastActivity": typed("string", "The last agent call or human input (RFC 3339)."),
	"cwd":          typed("string", "The shell's working directory."),
	"lastCommand": object("The session's running or latest command, yours or the human's: its commandId reads its output with ssh_read_output (also after your client gave up on the call).", schema{
		"commandId":        typed("string", "Pass to ssh_read_output (or, while it runs and it is yours, ssh_send_input and ssh_cancel)."),
		"command":          typed("string", "Its command line (cut to 200 bytes)."),
		"commandTruncated": typed("boolean", "True when command was cut; ssh_read_output {commandId, stream: \"command\"} reads it whole."),
		"source":           schema{"type": "string", "enum": []string{"agent", "human"}, "description": "agent: yours; human: the human's."},
		"state":            schema{"type": "string", "enum": []string{"running", "ended"}, "description": "running or ended."},
		"exitCode":         nullable("integer", "Once ended: its exit status; null when unknown."),
		"startedAt":        typed("string", "When it started (RFC 3339)."),
	}),
	"humanRequest": object("Your open request for the human (ssh_request_human): until they hand the session back, your calls that act on it answer session_busy.", schema{
		"requestId":   typed("string", "Pass to ssh_request_human to wait for the hand-back."),
		"message":     typed("string", "What you asked the human to do."),
		"requestedAt": typed("string", "When you asked (RFC 3339)."),
	}),
})

var sandboxSchema = object("What confines a sandboxed local session on this kernel.", schema{
	"landlockABI": typed("integer", "The kernel's Landlock ABI version."),
	"filesystem":  typed("string", "What the session may read and write."),
	"network":     typed("string", "What keeps the session off the network: namespace (a network namespace of its own), seccomp (a filter, where namespaces are refused) or host (network: true)."),
	"networkNote": typed("string", "With seccomp: why the session has no network namespace."),
	"tcp":         typed("string", "What TCP the session may use."),
	"udp":         typed("string", "What UDP the session may use."),
	"unixSockets": typed("string", "Which UNIX sockets the session may reach."),
	"signals":     typed("string", "Which processes the session may signal."),
	"notEnforced": arrayOf("What the sandbox does not prevent.", typed("string", "One limitation.")),
})

// replyFields are the fields every reply may carry: the outcome, and the
// fields of each error code.
var replyFields = schema{
	"success":              typed("boolean", "Whether the call did what it was asked."),
	"error":                typed("string", "On failure: a stable code to branch on, e.g. user_activity_detected, command_timeout, session_busy."),
	"message":              typed("string", "What happened and what to do next."),
	"field":                typed("string", "invalid_arguments: the argument that was wrong."),
	"hint":                 typed("string", "invalid_session_token: the call format."),
	"reason":               typed("string", "session_ended: why it ended (disconnected, idle_timeout, max_lifetime, shell_exited, human_exit, connection_lost, server_shutdown, server_restart, node_lost); session_busy: what holds the shell (agent_command, human_command, partial_line, continuation, not_idle, human_requested: you asked for the human and they have not handed back), or cwd_changed (the directory kept changing while the command waited; nothing ran)."),
	"requestId":            typed("string", "human_pending, session_busy (human_requested): your open request for the human; pass it to ssh_request_human to wait for the hand-back."),
	"requestedAt":          typed("string", "human_pending, session_busy (human_requested): when you asked for the human (RFC 3339)."),
	"endedAt":              typed("string", "session_ended: when (RFC 3339)."),
	"running":              typed("boolean", "command_timeout: the command is still running."),
	"commandId":            typed("string", "The command this reply is about; pass it to ssh_read_output."),
	"partial":              resultSchema,
	"runningCommand":       typed("string", "session_busy: the command that holds the shell (cut to 4 KiB: runningCommandTruncated)."),
	"runningSince":         typed("string", "session_busy: when it started (RFC 3339)."),
	"runningCommandId":     typed("string", "session_busy: the id of the running command, the human's or yours; ssh_read_output reads its output so far."),
	"runningForMs":         typed("integer", "session_busy: how long it has run, in milliseconds."),
	"userCommandCount":     typed("integer", "user_activity_detected: how many commands the human ran since your last call."),
	"userCommandsCompact":  typed("integer", "user_activity_detected: how many of the listed commands come without their output (older ones, to fit the reply): read it with ssh_read_output and their commandId."),
	"userCommandsOmitted":  typed("integer", "user_activity_detected: how many of the oldest commands did not fit the reply at all; historyId lists them."),
	"historyId":            typed("string", "user_activity_detected: pass as commandId to ssh_read_output for every command of this report, one JSON object a line."),
	"historyHint":          typed("string", "user_activity_detected: how to read the commands that did not fit."),
	"commandTruncatedHint": typed("string", "user_activity_detected: present when a command line was cut to fit: how to read it whole."),
	"unattributedCommands": typed("integer", "user_activity_detected: how many commands ran that no viewer's keystroke explains."),
	"unattributedHint":     typed("string", "user_activity_detected: what unattributed commands are."),
	"partialLine":          typed("string", "session_busy: what the human has typed at the prompt."),
	"exitCode":             nullable("integer", "shell_exited: the shell's exit status."),
	"signal":               typed("string", "shell_exited: the signal that ended the shell."),
	"userActivitySince":    typed("string", "user_activity_detected: when the first human command started (RFC 3339)."),
	"userCommands":         arrayOf("user_activity_detected: every command the human ran since your last call, in order.", userCommandSchema),
	"waitingForInput":      typed("boolean", "command_timeout, ssh_send_input, ssh_read_output: true when the command waits for keys from the terminal (a prompt, getpass, a REPL, a raw-mode prompt such as npm init's); answer with ssh_send_input. ssh_exec and ssh_read_output's waitSeconds return within about a second once it does. Present where tandem can tell (local sessions; over SSH where the login may read its processes' /proc/PID/syscall)."),
	"fullScreen":           typed("boolean", "command_timeout, ssh_send_input, ssh_read_output: a full-screen program (vim, less, top) shows the alternate screen; ssh_exec and waitSeconds return once it does."),
	"timeoutNote":          typed("string", "ssh_exec with timeoutSeconds over 55: common clients give up on a call after 60 s (and cancelling it interrupts the command); use at most 55 and follow longer commands with ssh_read_output."),
	"program":              typed("string", "With fullScreen: the program that holds the terminal, where tandem can tell."),
	"lastLine":             typed("string", "command_timeout: the last line the command printed, e.g. the prompt it waits at."),
	"connection":           typed("string", "approval_pending: the host:port a program of the command waits to reach, which the network allowlist does not list."),
	"approvalCwd":          typed("string", "approval_pending: the directory the approval is bound to; the same command from another directory asks again."),
	"auditError":           typed("string", "The call happened but could not be written to the audit log."),
	"mayHaveRun":           typed("boolean", "node_unavailable: the call reached the session's node before that node stopped answering, so it may have run there."),
	"approvalId":           typed("string", "The human approval this call needed: approved (the call ran), or approval_pending, approval_denied, approval_timeout."),
	"expiresAt":            typed("string", "approval_pending: when the approval expires unanswered (RFC 3339)."),
	"decidedBy":            typed("string", "approval_denied: who denied it: dashboard, client, upstream."),
	"rule":                 typed("string", "policy_denied and the approval codes: the policy rule that decided."),
	"background": object("Output that background jobs (cmd &) printed since your last reply, on their own: never inside a command's output. Read all of it with ssh_read_output and outputId as the commandId.", merge(schema{
		"outputId":    typed("string", "Pass as commandId to ssh_read_output."),
		"stdoutBytes": typed("integer", "How much stdout they printed."),
		"stderrBytes": typed("integer", "How much stderr they printed."),
	}, streamFields("stdout"), streamFields("stderr"))),

	"runningCommandTruncated": typed("boolean", "session_busy: runningCommand was cut; ssh_read_output {commandId: runningCommandId, stream: \"command\"} reads it whole."),
}

// outputSchema is the schema of one tool's replies: the common fields and
// the tool's own.
func outputSchema(own schema) json.RawMessage {
	return mustJSON(schema{"type": "object", "properties": merge(replyFields, touchFields, userFileFields, own), "required": []string{"success"}})
}

var sessionProps = schema{
	"sessionName":  typed("string", "The name given to ssh_connect."),
	"sessionToken": typed("string", "The sessionToken ssh_connect returned."),
}

func inputSchema(props schema, required ...string) json.RawMessage {
	s := schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return mustJSON(s)
}

var (
	sessionSchema = inputSchema(sessionProps, "sessionName", "sessionToken")

	approveSchema = inputSchema(schema{
		"tool_name":   typed("string", "The Claude Code tool about to be used, e.g. Bash, Edit, Write, WebFetch."),
		"input":       schema{"type": "object", "description": "That tool's input, as Claude Code would pass it; Bash's command is judged as a shell command."},
		"tool_use_id": typed("string", "Claude Code's id of this tool use (recorded, not judged)."),
	}, "tool_name", "input")

	execSchema = inputSchema(merge(sessionProps, schema{
		"command":        typed("string", "The command line, run by bash in the shared shell (up to 1 MiB)."),
		"timeoutSeconds": typed("number", "How long to wait for the command (default 50, under the 60 s request timeout of common clients; over 55 the reply carries a timeoutNote). The call answers command_timeout sooner once the command waits for input or shows a full-screen program. It keeps running after that: read it back with ssh_read_output, or stop it with ssh_cancel."),
	}), "sessionName", "sessionToken", "command")

	connectSchema = inputSchema(schema{
		"name":        typed("string", "A name for the session, unique among yours: 1-64 letters, digits, '.', '_' or '-'."),
		"target":      typed("string", "A configured target name. Omit to use the only configured target."),
		"host":        typed("string", "Ad-hoc SSH: the host name or address (where the server allows ad-hoc hosts)."),
		"port":        merge(typed("integer", "Ad-hoc SSH: the port."), schema{"default": 22, "minimum": 1, "maximum": 65535}),
		"username":    typed("string", "Ad-hoc SSH: the login name."),
		"password":    typed("string", "Ad-hoc SSH: a password. Never logged or audited."),
		"privateKey":  typed("string", "Ad-hoc SSH: private key content (PEM/OpenSSH). Never logged or audited."),
		"keyFilePath": typed("string", "Ad-hoc SSH: path of a private key file on tandem's machine."),
		"passphrase":  typed("string", "Ad-hoc SSH: the private key's passphrase. Never logged or audited."),
		"useAgent":    typed("boolean", "Ad-hoc SSH: authenticate with the ssh-agent tandem runs under."),
	}, "name")

	readOutputSchema = inputSchema(merge(sessionProps, schema{
		"commandId": typed("string", "The commandId of an ssh_exec, ssh_cancel or user_activity_detected reply: the agent's commands and the human's alike."),
		"stream":    schema{"type": "string", "enum": []string{"stdout", "stderr", "command"}, "default": "stdout", "description": "Which stream to read: stdout, stderr, or command, the command line itself (whole, where a reply cut it: commandTruncated)."},
		"offset":    typed("integer", "Byte offset to start at (default 0), e.g. a reply's nextOffset; negative counts from the end, e.g. -2000 for the last 2000 bytes. With grep: lines that start here or later."),
		"maxBytes":  merge(typed("integer", "The most bytes of the stream to return (default: the inline budget, at most 1 MiB). With grep: the most JSON the whole reply may take, though one line always comes."), schema{"minimum": 1, "maximum": readMaxBytes}),
		"encoding":  schema{"type": "string", "enum": []string{"text", "base64"}, "default": "text", "description": "text: data as text, bytes that are not UTF-8 shown as U+FFFD (lossy), or base64 when mostly binary; base64: the exact bytes, base64-encoded. Not with grep."},
		"grep":      typed("string", "An RE2 pattern: return the matching lines with their line numbers instead of raw bytes."),
		"context":   merge(typed("integer", "With grep: how many lines before and after each match to return too (default 0), like grep -C; overlapping context is returned once."), schema{"minimum": 0, "maximum": grepContextMax}),
		"waitSeconds": merge(typed("number", "While the command runs and has no output at offset yet (past its end, for a negative offset): wait up to this long for some, or for the command's end, instead of answering at once (default 0). The wait also ends, with waitingForInput or fullScreen, once the command waits for keys or shows a full-screen program. Follow a running command with offset set to the last nextOffset or totalBytes."),
			schema{"minimum": 0, "maximum": readWaitMax.Seconds()}),
	}), "sessionName", "sessionToken", "commandId")

	sendInputSchema = inputSchema(merge(sessionProps, schema{
		"commandId": typed("string", "Your running command, from the command_timeout (or session_busy) reply: input never goes to the human's commands or to the shell's prompt."),
		"input":     typed("string", "The keys to send, as typed: text, \u0003 for Ctrl-C, \u001b for Esc. Up to 64 KiB."),
		"submit":    schema{"type": "boolean", "default": false, "description": "Press Enter after input (input may then be empty)."},
		"waitSeconds": merge(typed("number", "How long to wait for what the command does next: its end, or output that then pauses (default 2)."),
			schema{"minimum": 0, "maximum": sendInputWaitMax.Seconds()}),
	}), "sessionName", "sessionToken", "commandId")

	requestHumanSchema = inputSchema(merge(sessionProps, schema{
		"message":   typed("string", "What you need the human to do at the keyboard, shown to them: e.g. \"Enter the sudo password for apt install\", \"Approve the 2FA prompt\", \"Decide which branch to keep\". Up to 2 KiB. Not needed with requestId."),
		"requestId": typed("string", "The requestId of a human_pending reply: wait again for that request instead of making a new one."),
		"waitSeconds": merge(typed("number", "How long this call waits for the hand-back before answering human_pending (default and most: 50, under the 60 s request timeout of common clients)."),
			schema{"minimum": 0, "maximum": requestHumanWaitMax.Seconds()}),
	}), "sessionName", "sessionToken")

	emptySchema = inputSchema(schema{})

	forwardPortSchema = inputSchema(merge(sessionProps, schema{
		"port": merge(typed("integer", "The port your server listens on in the session, on 127.0.0.1 or 0.0.0.0 (locally inside the session's own network; over SSH on the remote host)."), schema{"minimum": 1, "maximum": 65535}),
	}), "sessionName", "sessionToken", "port")

	forwardedPortSchema = object("One forwarded port.", schema{
		"port":     typed("integer", "The session's port."),
		"url":      typed("string", "The browser URL for the human: tandem's /s/{key}/port/{port}/, which sends a signed-in operator or admitted viewer on to the preview's own origin."),
		"openedAt": typed("string", "When it was forwarded (RFC 3339)."),
	})

	forwardPortOut = schema{
		"port":      typed("integer", "The session's port."),
		"url":       typed("string", "The browser URL for the human; it opens for tandem's signed-in operator or an admitted viewer, never with the monitoring link alone."),
		"listening": typed("boolean", "Whether something answered on the port when it was forwarded; until something does, the preview shows an error page."),
		"created":   typed("boolean", "False when the port was forwarded already (the same url)."),
	}

	uploadSchema = inputSchema(merge(sessionProps, schema{
		"path":      typed("string", "Where to write, relative to the session's workspace (or absolute inside it)."),
		"content":   typed("string", "The file's content: text, or with encoding base64 the exact bytes."),
		"encoding":  schema{"type": "string", "enum": []string{"utf8", "base64"}, "default": "utf8", "description": "utf8: content is the text itself; base64: content is the bytes in standard base64 (with padding)."},
		"mode":      schema{"type": "string", "pattern": "^0?[0-7]{3}$", "description": "Permission bits in octal, e.g. \"0755\" for a script (default: the replaced file's, or 0644)."},
		"overwrite": schema{"type": "boolean", "default": false, "description": "Replace an existing file (otherwise: file_exists, and the file stays as it was)."},
	}), "sessionName", "sessionToken", "path", "content")

	downloadSchema = inputSchema(merge(sessionProps, schema{
		"path":     typed("string", "The file to read, relative to the session's workspace (or absolute inside it)."),
		"offset":   merge(typed("integer", "For text: the byte offset to start at (default 0), e.g. a reply's nextOffset."), schema{"minimum": 0}),
		"maxBytes": merge(typed("integer", "For text: the most bytes of data to return (default: the inline budget, at most 1 MiB)."), schema{"minimum": 1, "maximum": readMaxBytes}),
	}), "sessionName", "sessionToken", "path")
)
