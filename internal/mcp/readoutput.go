package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
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
	default:
		return nil, invalidArg("stream", "must be \"stdout\" or \"stderr\", got %q", a.Stream)
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
