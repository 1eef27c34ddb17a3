package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"regexp"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
)

// Bounds of ssh_read_output.
const (
	// readMaxBytes is the most one ssh_read_output call returns.
	readMaxBytes = 1 << 20
	// grepLineMax is how much of one line grep matches and returns.
	grepLineMax = 4 << 10
)

type readOutputArgs struct {
	SessionName  string `json:"sessionName"`
	SessionToken string `json:"sessionToken"`
	CommandID    string `json:"commandId"`
	Stream       string `json:"stream"`
	Offset       *int64 `json:"offset"`
	MaxBytes     *int64 `json:"maxBytes"`
	Grep         string `json:"grep"`
}

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
	rec, done, found := sess.Command(a.CommandID)
	if !found {
		return nil, fail(codeUnknownCommand, fmt.Sprintf("Session '%s' has no command %q. Command IDs come from ssh_exec, ssh_cancel and user_activity_detected replies; a session keeps its latest %d commands.", sess.Name, a.CommandID, session.MaxKeptCommands), reply{"field": "commandId"})
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
	total := stream.Size()
	off := int64(0)
	if a.Offset != nil {
		off = *a.Offset
	}
	if off > total {
		return nil, invalidArg("offset", "is %d, past the end of %s (%d bytes so far); pass 0..%d, or a negative offset to count from the end", off, a.Stream, total, total)
	}
	aligned := off < 0
	if off < 0 {
		off = max(total+off, 0)
	}

	r := reply{"commandId": rec.ID, "stream": a.Stream, "totalBytes": total, "running": !done}
	if done {
		r["exitCode"] = exitCode(rec)
		r["durationMs"] = rec.Duration.Milliseconds()
	}
	if a.Grep != "" {
		re, err := regexp.Compile(a.Grep)
		if err != nil {
			return nil, invalidArg("grep", "is not an RE2 pattern: %v", err)
		}
		matches, next, err := grep(stream, total, off, limit, re)
		if err != nil {
			return nil, fmt.Errorf("read output: %w", err)
		}
		r["offset"], r["matches"] = off, matches
		r["eof"] = done && next >= total
		if next < total {
			r["nextOffset"] = next
			r["message"] = "More lines may match: call again with offset set to nextOffset."
		}
		return ok(r), nil
	}

	data := readRange(stream, off, min(limit, total-off))
	if aligned {
		// Counting from the end may land inside a character: start on one.
		k := 0
		for k < len(data) && k < utf8.UTFMax && !utf8.RuneStart(data[k]) {
			k++
		}
		if k < utf8.UTFMax && utf8.Valid(data[k:]) {
			data, off = data[k:], off+int64(k)
		}
	}
	if !utf8.Valid(data) {
		// Keep text for text cut mid-character at the end of the window.
		if n := wholeRunes(data, len(data)); n > 0 && off+int64(len(data)) < total && utf8.Valid(data[:n]) {
			data = data[:n]
		}
	}
	r["offset"], r["bytes"] = off, len(data)
	r["eof"] = done && off+int64(len(data)) >= total
	if utf8.Valid(data) {
		r["data"] = string(data)
	} else {
		r["data"], r["encoding"] = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return ok(r), nil
}

// grep returns the lines of the stream at or after off that match re, with
// their 1-based line numbers counted from the start of the stream, until
// the matched text reaches limit bytes. next is the offset to continue
// from (total when the scan reached the end). A line longer than
// grepLineMax is matched and returned by its first grepLineMax bytes;
// bytes that are not UTF-8 are shown as U+FFFD.
func grep(f capture, total, off, limit int64, re *regexp.Regexp) (matches []any, next int64, err error) {
	br := bufio.NewReaderSize(io.NewSectionReader(readerAt{f}, 0, total), 64<<10)
	matches = []any{}
	var used, pos int64
	var line []byte
	for n := 1; pos < total; n++ {
		start := pos
		line = line[:0]
		for {
			chunk, rerr := br.ReadSlice('\n')
			pos += int64(len(chunk))
			if len(line) < grepLineMax {
				line = append(line, chunk[:min(len(chunk), grepLineMax-len(line))]...)
			}
			if rerr == bufio.ErrBufferFull {
				continue
			}
			if rerr != nil && rerr != io.EOF {
				return nil, 0, rerr
			}
			break
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if start < off || !re.Match(line) {
			continue
		}
		text := string(bytes.ToValidUTF8(line, []byte("\uFFFD")))
		if used > 0 && used+int64(len(text)) > limit {
			return matches, start, nil
		}
		used += int64(len(text))
		matches = append(matches, reply{"line": n, "offset": start, "text": text})
	}
	return matches, total, nil
}

// readerAt adapts a capture for io.SectionReader.
type readerAt struct{ f capture }

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
