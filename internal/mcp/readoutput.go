package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/spool"
)

// readMaxBytes is the most one ssh_read_output call returns.
const readMaxBytes = 1 << 20

type readOutputArgs struct {
	SessionName  string   `json:"sessionName"`
	SessionToken string   `json:"sessionToken"`
	CommandID    string   `json:"commandId"`
	Stream       string   `json:"stream"`
	Offset       *int64   `json:"offset"`
	MaxBytes     *int64   `json:"maxBytes"`
	Grep         string   `json:"grep"`
	Context      *int     `json:"context"`
	Encoding     string   `json:"encoding"`
	WaitSeconds  *float64 `json:"waitSeconds"`
}

func (a readOutputArgs) callTimeout() time.Duration { return waitArg(a.WaitSeconds, 0) }

// readWaitMax bounds ssh_read_output's waitSeconds, under the clients'
// request timeout.
const readWaitMax = 50 * time.Second

// readOutput serves any kept command's output, the agent's or the human's,
// by command ID. It is read-only: the gate is neither checked nor reset,
// so reading what a human printed never hides that they did.
func (s *Server) readOutput(ctx context.Context, c session.Caller, a readOutputArgs) (reply, error) {
	if a.SessionName == "" || a.SessionToken == "" {
		return nil, invalidToken(a.SessionName)
	}
	sess, err := s.deps.Sessions.LookupOutput(c, a.SessionName, a.SessionToken)
	if err != nil {
		return nil, err
	}
	noteSession(ctx, sess)
	if err := require("commandId", a.CommandID); err != nil {
		return nil, err
	}
	var stream capture
	var waitState reply // what the command does, when the wait ended for it
	rec, done, found := sess.Command(a.CommandID)
	if !found {
		return nil, unknownCommand(sess, a.CommandID)
	}
	switch a.Stream {
	case "", "stdout":
		a.Stream, stream = "stdout", rec.Stdout
	case "stderr":
		stream = rec.Stderr
	case "command":
		stream = commandText(rec.Command)
	default:
		return nil, invalidArg("stream", "must be \"stdout\", \"stderr\" or \"command\" (the command line itself), got %q", a.Stream)
	}
	limit := int64(s.deps.InlineOutputBytes)
	if limit <= 0 || limit > readMaxBytes {
		limit = readMaxBytes
	}
	if a.MaxBytes != nil {
		if *a.MaxBytes < 1 || *a.MaxBytes > readMaxBytes {
			return nil, invalidArg("maxBytes", "must be between 1 and %d, got %d", readMaxBytes, *a.MaxBytes)
		}
		limit = *a.MaxBytes
	}
	exact := false
	switch a.Encoding {
	case "", "text":
	case "base64":
		exact = true
	default:
		return nil, invalidArg("encoding", "must be \"text\" or \"base64\", got %q", a.Encoding)
	}
	if w := a.WaitSeconds; w != nil {
		if *w < 0 || *w > readWaitMax.Seconds() {
			return nil, invalidArg("waitSeconds", "must be between 0 and %g", readWaitMax.Seconds())
		}
		if !done {
			// Until there is output at offset (past what exists, for a
			// negative offset), or the command ends.
			want := int64(0)
			switch {
			case a.Offset == nil:
			case *a.Offset < 0:
				want = stream.Size()
			default:
				want = *a.Offset
			}
			i := 0
			if a.Stream == "stderr" {
				i = 1
			}
			st, settled := sess.WaitOutput(ctx, a.CommandID, waitArg(w, 0), func(rec session.Record, done bool) bool {
				return done || [2]capture{rec.Stdout, rec.Stderr}[i].Size() > want
			})
			rec, done, _ = sess.Command(a.CommandID)
			if settled && !done {
				waitState = reply{}
				stateFields(waitState, st)
			}
		}
	}
	total := stream.Size()
	off := int64(0)
	if a.Offset != nil {
		off = *a.Offset
	}
	if off > total {
		return nil, invalidArg("offset", "is %d, past the end of %s (%d bytes so far); pass 0..%d, or a negative offset to count from the end", off, a.Stream, total, total)
	}
	fromEnd := off < 0
	if off < 0 {
		off = max(total+off, 0)
	}

	if f, isFile := stream.(*spool.File); isFile && f.Removed() {
		return nil, commandGone(sess, a.CommandID) // removed since it was found
	}
	r := reply{"commandId": rec.ID, "stream": a.Stream, "totalBytes": total, "running": !done}
	maps.Copy(r, waitState)
	if n := rec.Redacted.Stdout; a.Stream == "stdout" && n > 0 {
		r["redacted"] = n
	} else if n := rec.Redacted.Stderr; a.Stream == "stderr" && n > 0 {
		r["redacted"] = n
	}
	if done {
		r["exitCode"] = exitCode(rec)
		r["durationMs"] = rec.Duration.Milliseconds()
	}
	interruptFields(r, rec)
	if a.Grep == "" {
		if a.Context != nil {
			return nil, invalidArg("context", "applies to grep: pass grep too, or leave context out")
		}
		readBytes(r, stream, off, min(limit, total-off), total, done, fromEnd, exact)
		return ok(r), nil
	}
	if exact {
		return nil, invalidArg("encoding", "applies to byte reads: grep returns lines as text")
	}
	q := grepQuery{f: stream, total: total, off: off, budget: int(limit)}
	if a.Context != nil {
		if *a.Context < 0 || *a.Context > grepContextMax {
			return nil, invalidArg("context", "must be between 0 and %d, got %d", grepContextMax, *a.Context)
		}
		q.context = *a.Context
	}
	if q.re, err = regexp.Compile(a.Grep); err != nil {
		return nil, invalidArg("grep", "is not an RE2 pattern: %v", err)
	}
	if err := grep(ctx, r, q, done); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read output: %w", ctx.Err())
		}
		if errors.Is(err, spool.ErrRemoved) {
			return nil, commandGone(sess, a.CommandID)
		}
		return nil, fmt.Errorf("read output: %w: %w", errOutputRead, err)
	}
	return ok(r), nil
}

// readBytes puts n bytes of the stream at off into r as data: as text,
// bytes that are not UTF-8 shown as U+FFFD (lossy), unless they are mostly
// binary or exact asks for them as they are, in base64. A text read
// counted from the end starts on a character, and one that stops before
// the end does not cut one. nextOffset says where the next read starts.
func readBytes(r reply, f capture, off, n, total int64, done, fromEnd, exact bool) {
	data := readRange(f, off, n)
	if !exact {
		if fromEnd {
			k := 0
			for k < len(data) && k < utf8.UTFMax-1 && !utf8.RuneStart(data[k]) {
				k++
			}
			data, off = data[k:], off+int64(k)
		}
		if off+int64(len(data)) < total {
			if k := wholeRunes(data, len(data)); k > 0 {
				data = data[:k]
			}
		}
	}
	end := off + int64(len(data))
	r["offset"], r["bytes"] = off, len(data)
	r["eof"] = done && end >= total
	if end < total {
		r["nextOffset"] = end
	}
	if exact || mostlyBinary(data) {
		r["data"], r["encoding"] = base64.StdEncoding.EncodeToString(data), "base64"
		return
	}
	text, replaced := validText(data)
	r["data"] = string(text)
	if replaced > 0 {
		r["lossy"] = true
	}
}

// errOutputRead wraps a failure to read a spooled stream back (a disk
// error): the output_unavailable code.
var errOutputRead = errors.New("output unreadable")

// commandText serves a command's own line as a stream: a line cut to fit
// a reply (commandTruncated) reads back whole with stream "command".
type commandText string

func (t commandText) Size() int64 { return int64(len(t)) }

func (t commandText) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(t)) {
		return 0, io.EOF
	}
	n := copy(p, t[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (t commandText) Persist() (string, error) { return "", errors.New("a command line has no file") }
func (t commandText) Lost() int64              { return 0 }
func (t commandText) Err() error               { return nil }

// commandGone is the reply for a command ID the session cannot read:
// removed to keep the session's outputs within their bound on disk (when,
// how big, whether the agent had been told of it), or never its own.
func commandGone(sess *session.Session, id string) *failure {
	f, removed := sess.Forgotten(id)
	if !removed {
		return fail(codeUnknownCommand, fmt.Sprintf("Session '%s' has no command %q. Command IDs come from ssh_exec, ssh_cancel, ssh_list_sessions, session_busy and user_activity_detected replies, and stay readable until the session's outputs pass limits.keptOutputBytes on disk.", sess.Name, id), reply{"field": "commandId"})
	}
	why := "the oldest outputs go first"
	if f.Unreported {
		why = "it went before you were told of it: the human's commands since your last call passed the bound by themselves"
	}
	return fail(codeOutputRemoved, fmt.Sprintf("The output of command %q of session '%s' was removed at %s (%d bytes) to keep the session's outputs within limits.keptOutputBytes (%d bytes on disk); %s. Read an output soon after a reply names it, write a large output to a file in the session, or ask the operator to raise limits.keptOutputBytes.", id, sess.Name, f.At.UTC().Format(time.RFC3339), f.Bytes, f.Limit, why), reply{"field": "commandId"})
}

// truncated counts the entries of a gate reply whose command line was cut.
func truncated(cmds []any) int {
	n := 0
	for _, c := range cmds {
		if r, ok := c.(reply); ok && r["commandTruncated"] == true {
			n++
		}
	}
	return n
}

// clipRunning puts the command that holds the shell in a session_busy
// reply, cut to a whole gate entry's size: a pasted block can be a
// megabyte, and ssh_read_output reads it whole (stream "command").
func clipRunning(f reply, cmd string) {
	if len(cmd) <= gateCommandBytes {
		f["runningCommand"] = cmd
		return
	}
	f["runningCommand"] = strings.ToValidUTF8(cmd[:gateCommandBytes], "")
	f["runningCommandTruncated"] = true
}
