package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/redact"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/transfer"
)

// ssh_upload and ssh_download move whole files between the agent and the
// session's workspace, through the session's file channel (package
// transfer: SFTP on the SSH connection, or a file server under the local
// sandbox's rules). Each is judged by the policy with its path, passes the
// gate like any call, and is audited with path, size and SHA-256, never
// content.

// Defaults of the file tools' bounds.
const (
	// DefaultTransferBytes bounds one upload or download when Deps sets
	// no limit (config's default is the same).
	DefaultTransferBytes = 50 << 20
	// imageMaxBytes bounds an image sent as an image block: model APIs
	// take images of about 5 MB. A larger one comes as a resource link.
	imageMaxBytes = 5 << 20
	// filePageBytes is one page of a downloaded file's resource. The
	// TypeScript SDK's stdio transport drops the connection on a message
	// over 10 MiB, and gathers a message by copying all it has so far at
	// each read of the pipe: 1 MiB (1.4 MB of base64) stays far under the
	// limit, and downloads through it ran fastest at 0.5–2 MiB.
	filePageBytes = 1 << 20
	// sniffBytes is how much of a file decides text or binary.
	sniffBytes = 8 << 10
)

// MessageBytes is the longest MCP message that an upload of n bytes
// needs: base64 (4 bytes for 3) and room for the rest of the request.
// Transports must accept messages this long.
func MessageBytes(n int64) int {
	return int((n+2)/3*4) + 1<<20
}

type uploadArgs struct {
	SessionName  string  `json:"sessionName"`
	SessionToken string  `json:"sessionToken"`
	Path         string  `json:"path"`
	Content      *string `json:"content"`
	Encoding     string  `json:"encoding"`
	Mode         string  `json:"mode"`
	Overwrite    bool    `json:"overwrite"`
}

type downloadArgs struct {
	SessionName  string `json:"sessionName"`
	SessionToken string `json:"sessionToken"`
	Path         string `json:"path"`
	Offset       *int64 `json:"offset"`
	MaxBytes     *int64 `json:"maxBytes"`
}

func (s *Server) uploadLimit() int64 {
	if s.deps.UploadBytes > 0 {
		return s.deps.UploadBytes
	}
	return DefaultTransferBytes
}

func (s *Server) downloadLimit() int64 {
	if s.deps.DownloadBytes > 0 {
		return s.deps.DownloadBytes
	}
	return DefaultTransferBytes
}

// upload writes content to path in the session's workspace.
func (s *Server) upload(ctx context.Context, c session.Caller, a uploadArgs) (reply, error) {
	info := callFrom(ctx)
	if err := s.handedContent(info, &a); err != nil {
		return nil, err
	}
	note := transferNote{"sessionName": a.SessionName, "path": a.Path, "encoding": a.Encoding, "overwrite": a.Overwrite}
	if a.Mode != "" {
		note["mode"] = a.Mode
	}
	if a.Content != nil {
		note["contentChars"] = len(*a.Content)
	}
	info.argsAudit = note.json()
	sess, err := s.lookup(ctx, c, sessionArgs{a.SessionName, a.SessionToken})
	if err != nil {
		return nil, err
	}
	if err := require("path", a.Path); err != nil {
		return nil, err
	}
	if a.Content == nil {
		return nil, invalidArg("content", "is missing: pass the file's content (\"\" for an empty file)")
	}
	data, err := decodeContent(*a.Content, a.Encoding, s.uploadLimit())
	if err != nil {
		return nil, err
	}
	mode, err := parseMode(a.Mode)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	note["bytes"], note["sha256"] = len(data), hash
	info.argsAudit = note.json()
	if int64(len(data)) > s.uploadLimit() {
		return nil, tooLarge(a.Path, int64(len(data)), s.uploadLimit(), "limits.uploadBytes")
	}
	files, rel, err := s.filesFor(ctx, sess, a.Path)
	if err != nil {
		return nil, err
	}
	act := sessionAction(c, sess, "ssh_upload", fmt.Sprintf("upload %s (%d bytes, sha256 %s)", rel, len(data), hash))
	if err := s.authorizeFile(ctx, c, sess, "ssh_upload", rel, act); err != nil {
		return nil, err
	}
	res, err := files.Put(ctx, a.Path, bytes.NewReader(data), transfer.PutOptions{
		Mode: mode, Overwrite: a.Overwrite, MaxBytes: s.uploadLimit(), LimitName: "limits.uploadBytes"})
	if err != nil {
		return nil, fileFailure(a.Path, err)
	}
	info.bytes = res.Bytes
	return ok(reply{"path": res.Path, "bytes": res.Bytes, "sha256": res.SHA256}), nil
}

// download returns a file of the session's workspace: an image as an
// image block, text bounded like output, anything else as a resource.
func (s *Server) download(ctx context.Context, c session.Caller, a downloadArgs) (reply, error) {
	info := callFrom(ctx)
	sess, err := s.lookup(ctx, c, sessionArgs{a.SessionName, a.SessionToken})
	if err != nil {
		return nil, err
	}
	if err := require("path", a.Path); err != nil {
		return nil, err
	}
	var off int64
	if a.Offset != nil {
		if off = *a.Offset; off < 0 {
			return nil, invalidArg("offset", "must be 0 or more (a byte offset into the file, e.g. a reply's nextOffset), got %d", off)
		}
	}
	chunk := int64(s.deps.InlineOutputBytes)
	if chunk <= 0 || chunk > readMaxBytes {
		chunk = readMaxBytes
	}
	if a.MaxBytes != nil {
		if chunk = *a.MaxBytes; chunk < 1 || chunk > readMaxBytes {
			return nil, invalidArg("maxBytes", "must be between 1 and %d, got %d", readMaxBytes, chunk)
		}
	}
	files, rel, err := s.filesFor(ctx, sess, a.Path)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeFile(ctx, c, sess, "ssh_download", rel, sessionAction(c, sess, "ssh_download", "download "+rel)); err != nil {
		return nil, err
	}
	f, err := files.Open(ctx, a.Path)
	if err != nil {
		return nil, fileFailure(a.Path, err)
	}
	defer f.Close()
	if f.Size > s.downloadLimit() {
		return nil, tooLarge(a.Path, f.Size, s.downloadLimit(), "limits.downloadBytes")
	}
	head := make([]byte, min(f.Size, sniffBytes))
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, f.Size), head); err != nil {
		return nil, fileFailure(a.Path, err)
	}
	r := reply{"path": f.Path, "bytes": f.Size}
	var sum string
	switch mime := imageType(head); {
	case mime != "" && f.Size <= imageMaxBytes:
		data := make([]byte, f.Size)
		if _, err := io.ReadFull(io.NewSectionReader(f, 0, f.Size), data); err != nil {
			return nil, fileFailure(a.Path, err)
		}
		h := sha256.Sum256(data)
		sum = hex.EncodeToString(h[:])
		r["kind"], r["mimeType"] = "image", mime
		info.content = []mcp.Content{&mcp.ImageContent{Data: data, MIMEType: mime}}
	case isText(head):
		if sum, err = hashFile(f); err != nil {
			return nil, fileFailure(a.Path, err)
		}
		r["kind"] = "text"
		if err := s.textChunk(ctx, r, f, off, chunk); err != nil {
			return nil, fileFailure(a.Path, err)
		}
		if f.Size > readMaxBytes {
			s.fileResource(ctx, c, sess, f, sum, "text/plain", r)
		}
	default:
		if sum, err = hashFile(f); err != nil {
			return nil, fileFailure(a.Path, err)
		}
		r["kind"] = "binary"
		mime := "application/octet-stream"
		if imageType(head) != "" {
			r["kind"] = "image"
			mime = imageType(head)
		}
		r["mimeType"] = mime
		s.fileResource(ctx, c, sess, f, sum, mime, r)
	}
	r["sha256"] = sum
	info.bytes = f.Size
	info.argsAudit = transferNote{"sessionName": a.SessionName, "path": a.Path, "offset": off, "bytes": f.Size, "sha256": sum}.json()
	return ok(r), nil
}

// textChunk puts at most n bytes of a text file from off into r as data,
// redacted like output, ending on a line where one ends in it.
func (s *Server) textChunk(ctx context.Context, r reply, f *transfer.File, off, n int64) error {
	r["offset"] = off
	if off >= f.Size {
		r["data"], r["eof"] = "", true
		return nil
	}
	buf := make([]byte, min(n, f.Size-off))
	if _, err := io.ReadFull(io.NewSectionReader(f, off, f.Size-off), buf); err != nil {
		return err
	}
	end := off + int64(len(buf))
	if end < f.Size {
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			buf = buf[:i+1]
		} else {
			buf = buf[:validPrefix(buf)]
		}
		if len(buf) == 0 {
			return invalidArg("maxBytes", "is too small to hold the character at offset %d", off)
		}
		end = off + int64(len(buf))
		r["nextOffset"] = end
	} else {
		r["eof"] = true
	}
	text := string(buf)
	if !utf8.ValidString(text) {
		text, r["lossy"] = strings.ToValidUTF8(text, "\uFFFD"), true
	}
	if red := callFrom(ctx).redact; red != nil {
		var counts redact.Counts
		text, counts = red.String(text)
		if k := counts.Total(); k > 0 {
			r["redacted"] = k
		}
	}
	r["data"] = text
	return nil
}

// filesFor opens the session's files after the checks every call makes
// (the human holding the session, the gate) and resolves path: rel is
// it relative to the workspace, for the policy.
func (s *Server) filesFor(ctx context.Context, sess *session.Session, p string) (transfer.Files, string, error) {
	if err := sess.AgentMayAct(); err != nil {
		return nil, "", err
	}
	if err := sess.Gate(); err != nil {
		return nil, "", err
	}
	files, err := sess.Files(ctx)
	if err != nil {
		return nil, "", fileFailure(p, err)
	}
	real, err := files.Resolve(ctx, p)
	if err != nil && files.Err() != nil {
		// The channel had ended since the last call (a file server that
		// exited): the session opens a new one, once.
		if files, err = sess.Files(ctx); err != nil {
			return nil, "", fileFailure(p, err)
		}
		real, err = files.Resolve(ctx, p)
	}
	if err != nil {
		return nil, "", fileFailure(p, err)
	}
	return files, transfer.Rel(files.Root(), real), nil
}

// authorizeFile asks the policy about a file tool on rel.
func (s *Server) authorizeFile(ctx context.Context, c session.Caller, sess *session.Session, tool, rel string, act approval.Action) error {
	return s.authorizeInput(ctx, c, sess.Target.Name, act, policy.Input{Tool: tool, Path: rel, HasPath: true})
}

// TransferCode is the stable error code of an error of package transfer,
// the one place they map: ssh_upload and ssh_download answer with it, and
// so does the monitoring page's transfer. "" for any other error.
func TransferCode(err error) string {
	switch {
	case errors.Is(err, transfer.ErrEscapes):
		return codePathOutside
	case errors.Is(err, transfer.ErrTooLarge):
		return codeFileTooLarge
	case errors.Is(err, transfer.ErrExists):
		return codeFileExists
	case errors.Is(err, transfer.ErrNotFound):
		return codeFileNotFound
	case errors.Is(err, transfer.ErrIsDir), errors.Is(err, transfer.ErrNotRegular):
		return codeNotAFile
	case errors.Is(err, transfer.ErrBadPath):
		return codeInvalidArguments
	case errors.Is(err, transfer.ErrDenied):
		return codeFileDenied
	case errors.Is(err, transfer.ErrUnavailable):
		return codeFilesUnavailable
	}
	return ""
}

// fileFailure maps package transfer's errors to the stable codes.
func fileFailure(p string, err error) error {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	var pe *transfer.PathError
	rule := ""
	if errors.As(err, &pe) && pe.Rule != "" {
		rule = " (" + pe.Rule + ")"
	}
	fields := reply{"path": p}
	switch TransferCode(err) {
	case codePathOutside:
		return fail(codePathOutside, fmt.Sprintf("The path %q leads out of the session's workspace%s, and file transfers stay inside it. Nothing was read or written. Use a path inside the workspace (relative paths start there).", p, rule), fields)
	case codeFileTooLarge:
		return fail(codeFileTooLarge, fmt.Sprintf("The content of %q is over the limit: %v. Nothing was written.", p, err), fields)
	case codeFileExists:
		return fail(codeFileExists, fmt.Sprintf("%q exists already and was left as it was. Pass overwrite: true to replace it.", p), fields)
	case codeFileNotFound:
		return fail(codeFileNotFound, fmt.Sprintf("There is no file %q in the session's workspace%s.", p, rule), fields)
	case codeNotAFile:
		return fail(codeNotAFile, fmt.Sprintf("%q is not a regular file (%v): only files are transferred.", p, errors.Unwrap(err)), fields)
	case codeInvalidArguments:
		return invalidArg("path", "%v", err)
	case codeFileDenied:
		return fail(codeFileDenied, fmt.Sprintf("The session's side refused access to %q (file permissions, or the sandbox's rules). Nothing was written.", p), fields)
	case codeFilesUnavailable:
		return fail(codeFilesUnavailable, fmt.Sprintf("This session cannot transfer files: %v. Use ssh_exec instead.", err), nil)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fail(codeCancelled, "The transfer was cancelled before it finished; an upload left no file under its name.", fields)
	}
	return fail(codeFilesUnavailable, fmt.Sprintf("The transfer of %q failed: %v. An upload left no file under its name.", p, err), fields)
}

func tooLarge(p string, n, limit int64, setting string) error {
	return fail(codeFileTooLarge, fmt.Sprintf("%q is %d bytes, over the limit of %d (%s). Nothing was transferred. Split it, or ask the operator to raise %s.", p, n, limit, setting, setting),
		reply{"path": p, "bytes": n, "limit": limit})
}

// decodeContent turns an upload's content into its bytes.
func decodeContent(content, encoding string, limit int64) ([]byte, error) {
	switch encoding {
	case "", "utf8":
		return []byte(content), nil
	case "base64":
		if int64(base64.StdEncoding.DecodedLen(len(content))) > limit+2 {
			return nil, tooLarge("content", int64(base64.StdEncoding.DecodedLen(len(content))), limit, "limits.uploadBytes")
		}
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, invalidArg("content", "is not valid base64 (standard alphabet, with padding): %v", err)
		}
		return b, nil
	}
	return nil, invalidArg("encoding", "must be \"utf8\" (the default) or \"base64\", got %q", encoding)
}

// parseMode reads an octal permission string such as "0644".
func parseMode(m string) (fs.FileMode, error) {
	if m == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(m, 8, 32)
	if err != nil || v == 0 || v > 0o777 {
		return 0, invalidArg("mode", "must be octal permission bits such as \"0644\" or \"0755\" (no setuid, setgid or sticky), got %q", m)
	}
	return fs.FileMode(v), nil
}

// imageType is the MIME type of an image the model can see, by its first
// bytes (never its name): PNG, JPEG, GIF or WebP; "" otherwise.
func imageType(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// isText reports whether a file's first bytes look like text: no NUL,
// and UTF-8 but for a character cut at the end.
func isText(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return false
	}
	return utf8.Valid(head[:validPrefix(head)]) && len(head)-validPrefix(head) < utf8.UTFMax
}

// validPrefix is the length of b without a UTF-8 character cut at its end.
func validPrefix(b []byte) int {
	for i := len(b); i > 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i-1]) {
			if utf8.FullRune(b[i-1:]) {
				return len(b)
			}
			return i - 1
		}
	}
	return len(b)
}

// hashFile is the hex SHA-256 of the whole file.
func hashFile(f *transfer.File) (string, error) {
	h := sha256.New()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := f.WriteTo(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// transferNote is what the audit keeps of a file tool's arguments.
type transferNote map[string]any

func (n transferNote) json() json.RawMessage {
	b, err := json.Marshal(n)
	if err != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	return b
}

// transferTools are the file tools' definitions, registered with the rest.
func (s *Server) transferTools() []toolSpec {
	return []toolSpec{
		{name: "ssh_upload", title: "Upload a file", in: uploadSchema, destructive: true,
			desc: "Write a file into the session's workspace (relative paths start there; nothing outside it is written): text as it is, or binary as base64. Atomic: the file appears whole or not at all, never half-written. Missing directories are created; an existing file is replaced only with overwrite. Returns the file's path, size and SHA-256. Judged by the policy with its path; refused once with user_activity_detected if the human ran commands since your last call.",
			out: schema{"path": typed("string", "The file's real path on the session's side."),
				"bytes":  typed("integer", "Its size in bytes."),
				"sha256": typed("string", "The SHA-256 of its content, in hex."),
				"limit":  typed("integer", "With file_too_large: the limit in bytes.")},
			handler: handler(s, "ssh_upload", s.upload)},
		{name: "ssh_download", title: "Download a file", in: downloadSchema,
			desc: "Read a file of the session's workspace (relative paths start there). An image (PNG, JPEG, GIF, WebP, up to 5 MiB) comes as an image block you can see; text comes as data, redacted like output and bounded like ssh_read_output (follow nextOffset); anything else, and text over 1 MiB, as a resource to read with resources/read in pages. Always with its size and SHA-256. Judged by the policy with its path.",
			out: schema{"path": typed("string", "The file's real path on the session's side."),
				"bytes":      typed("integer", "The file's size in bytes."),
				"sha256":     typed("string", "The SHA-256 of the whole file, in hex."),
				"kind":       schema{"type": "string", "enum": []string{"image", "text", "binary"}, "description": "image: an image block follows this JSON (or, over 5 MiB, a resource); text: data holds it from offset; binary: read resource."},
				"mimeType":   typed("string", "For an image or binary file: its type, from its first bytes."),
				"offset":     typed("integer", "For text: the byte offset data starts at."),
				"data":       typed("string", "For text: the file from offset, at most maxBytes, ending on a line where one ends; secrets replaced as in output (redacted)."),
				"nextOffset": typed("integer", "For text: present when more follows: pass it as offset."),
				"eof":        typed("boolean", "For text: true when data reaches the end of the file."),
				"redacted":   typed("integer", "How many secrets data had replaced, if any."),
				"lossy":      typed("boolean", "Present (true) when bytes of data that are not UTF-8 were replaced by U+FFFD."),
				"limit":      typed("integer", "With file_too_large: the limit in bytes."),
				"resource": object("The whole file as an MCP resource (binary files, images over 5 MiB, text over 1 MiB); a resource_link block names it too.", schema{
					"uri":       typed("string", "Resource URI; add ?page=N for page N (from 0)."),
					"pages":     typed("integer", "How many pages."),
					"pageBytes": typed("integer", "The bytes of one page (the last may be shorter)."),
				})},
			handler: handler(s, "ssh_download", s.download)},
	}
}
