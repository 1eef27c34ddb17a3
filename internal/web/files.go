package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// The human's side of the session's files: whoever may type on the page
// (the operator, an admitted viewer, tandem attach) may also put a file
// into the session's workspace and take one out, by path. The watch link
// alone does neither: the agent holds it too.
//
//	browser ──POST /s/{key}/files?path=P[&overwrite=1]──▶ FileDesk.PutFile
//	          body: the file's bytes, Origin: this server
//	        ◀── {"success":true,"path","bytes","sha256"} or {success:false,error,message}
//	        ──GET /s/{key}/files?path=P──────────────────▶ FileDesk.GetFile
//	        ◀── the bytes, as an attachment, or {success:false,error,message}

// FileDesk is implemented by a Terminal whose session's files its
// viewers who may type can upload and download. The session layer
// implements it, with the same policy, limits and audit as the agent's
// transfers; the viewer is [ViewerFrom](ctx).
type FileDesk interface {
	// FileLimits are the most bytes one upload and one download may hold.
	FileLimits() (upload, download int64)
	// PutFile writes body as the file at path (relative to the session's
	// workspace, as the agent's transfers take it) so that no partial file
	// is ever seen under that name. overwrite allows replacing a file.
	// Its errors wrap the File* sentinels where one fits, or are a
	// *[FileError].
	PutFile(ctx context.Context, path string, body io.Reader, overwrite bool) (FileMoved, error)
	// GetFile copies the file at path into the writer start returns,
	// calling start once with the file's size (the caller's Content-Length)
	// before the first byte. An error before start is a refusal, as for
	// PutFile; one after it cuts the download short.
	GetFile(ctx context.Context, path string, start func(size int64) io.Writer) (FileMoved, error)
}

// FileMoved is a file a viewer put or took: its path as the session
// names it, its size and the SHA-256 of its bytes, in hex.
type FileMoved struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Kinds of refusal a [FileDesk] reports, each its own HTTP status.
var (
	// ErrFileNotFound: no file at the path (404).
	ErrFileNotFound = errors.New("no such file")
	// ErrFileExists: a file is there and the viewer did not ask to replace
	// it (409).
	ErrFileExists = errors.New("the file exists")
	// ErrFileTooLarge: the file is over the limit (413).
	ErrFileTooLarge = errors.New("the file is too large")
	// ErrFileRefused: the path leaves the workspace, a policy rule denies
	// it, or the session's sandbox refuses it (403).
	ErrFileRefused = errors.New("refused")
	// ErrFileBadPath: the path is empty, names a directory or is otherwise
	// not a file's path (400).
	ErrFileBadPath = errors.New("not a file's path")
	// ErrFileUnavailable: the session cannot move files now (its file
	// channel failed, or the audit log cannot record the transfer) (503).
	ErrFileUnavailable = errors.New("file transfer unavailable")
)

// FileError is a refusal with the stable code and the sentence the page
// shows. Kind is one of the File* sentinels.
type FileError struct {
	Kind    error
	Code    string
	Message string
}

// Error is the message.
func (e *FileError) Error() string { return e.Message }

// Unwrap is the kind, for errors.Is.
func (e *FileError) Unwrap() error { return e.Kind }

// filesReply is the reply of a finished upload: apiReply's fields and the
// file's.
type filesReply struct {
	Success bool `json:"success"`
	FileMoved
}

// filesTimeout bounds one transfer: 50 MiB at a slow 1 MiB/s with room.
const filesTimeout = 10 * time.Minute

// filesDesk finds the live session of the request's key and checks that
// the viewer may type there, answering the request itself when not: 404
// as for any unknown page, 403 for a viewer who may only watch. It
// returns the desk and the request's context, naming the viewer.
func (s *Server) filesDesk(w http.ResponseWriter, r *http.Request) (FileDesk, context.Context, bool) {
	key := r.PathValue("key")
	t, ok := s.sessions.Terminal(key)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no live session has this page")
		return nil, nil, false
	}
	desk, ok := t.(FileDesk)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this session's files cannot be reached from the page")
		return nil, nil, false
	}
	typing, who := s.mayType(r, key)
	if !typing {
		s.log.Info("web: file transfer by a viewer who may only watch refused", "viewer", who, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "watching_only",
			"this link only watches, and the agent has it too: uploading and downloading files needs the operator (the dashboard link) or the operator's typing link")
		return nil, nil, false
	}
	ctx := context.WithValue(r.Context(), viewerKey{}, who+" "+r.RemoteAddr)
	return desk, ctx, true
}

// filePath is the request's ?path=, or "" with the reply made.
func filePath(w http.ResponseWriter, r *http.Request) string {
	p := r.URL.Query().Get("path")
	if strings.TrimSpace(p) == "" || strings.ContainsRune(p, 0) {
		writeError(w, http.StatusBadRequest, "bad_path", `give the file's path in the workspace as ?path= (such as "notes/plan.md")`)
		return ""
	}
	return p
}

// serveUpload answers POST /s/{key}/files?path=P: the body is the file.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.log.Info("web: cross-origin upload refused", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "cross_origin", "the upload did not come from the session's own page")
		return
	}
	desk, ctx, ok := s.filesDesk(w, r)
	if !ok {
		return
	}
	p := filePath(w, r)
	if p == "" {
		return
	}
	limit, _ := desk.FileLimits()
	if r.ContentLength > limit {
		s.fileRefused(w, fmt.Errorf("%w: %d bytes", ErrFileTooLarge, r.ContentLength), limit)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, filesTimeout)
	defer cancel()
	body := cutGuard{http.MaxBytesReader(w, r.Body, limit)}
	overwrite, _ := strconv.ParseBool(r.URL.Query().Get("overwrite"))
	done, err := desk.PutFile(ctx, p, body, overwrite)
	if err != nil {
		s.log.Info("web: upload refused", "path", p, "viewer", ViewerFrom(ctx), "err", err)
		s.fileRefused(w, err, limit)
		return
	}
	s.log.Info("web: file uploaded", "path", done.Path, "bytes", done.Bytes, "viewer", ViewerFrom(ctx))
	writeJSON(w, http.StatusOK, filesReply{Success: true, FileMoved: done})
}

// serveDownload answers GET /s/{key}/files?path=P with the file, always as
// an attachment of no type a browser would render: the page's origin must
// never run what a session wrote.
func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		// A HEAD would read the whole file for nothing, and tell the agent
		// of a download no one made.
		w.Header().Set("Allow", http.MethodGet+", "+http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "download with GET")
		return
	}
	// A page of another origin (a preview of the agent's dev server may
	// be same-site) has no business here, even without reading the reply.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		writeError(w, http.StatusForbidden, "cross_origin", "the download did not come from the session's own page")
		return
	}
	desk, ctx, ok := s.filesDesk(w, r)
	if !ok {
		return
	}
	p := filePath(w, r)
	if p == "" {
		return
	}
	_, limit := desk.FileLimits()
	ctx, cancel := context.WithTimeout(ctx, filesTimeout)
	defer cancel()
	started := false
	done, err := desk.GetFile(ctx, p, func(size int64) io.Writer {
		started = true
		hd := w.Header()
		hd.Set("Content-Type", "application/octet-stream")
		disp := mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)})
		if disp == "" { // a name no header can carry: the page names the file itself
			disp = "attachment"
		}
		hd.Set("Content-Disposition", disp)
		hd.Set("Content-Length", strconv.FormatInt(size, 10))
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
		w.WriteHeader(http.StatusOK)
		return w
	})
	switch {
	case err != nil && !started:
		s.log.Info("web: download refused", "path", p, "viewer", ViewerFrom(ctx), "err", err)
		s.fileRefused(w, err, limit)
	case err != nil:
		s.log.Info("web: download cut short", "path", p, "viewer", ViewerFrom(ctx), "err", err)
	default:
		s.log.Info("web: file downloaded", "path", done.Path, "bytes", done.Bytes, "viewer", ViewerFrom(ctx))
	}
}

// fileRefused answers a refused transfer with its status, code and a
// sentence the page shows.
func (s *Server) fileRefused(w http.ResponseWriter, err error, limit int64) {
	var fe *FileError
	var mbe *http.MaxBytesError
	code, msg := "", ""
	if errors.As(err, &fe) {
		code, msg = fe.Code, fe.Message
	}
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, ErrFileTooLarge):
		status = http.StatusRequestEntityTooLarge
		if code == "" || errors.As(err, &mbe) {
			code, msg = "file_too_large", fmt.Sprintf("the file is over the limit of %d bytes (limits.uploadBytes and limits.downloadBytes in tandem.yaml); nothing was written", limit)
		}
	case errors.Is(err, ErrFileNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrFileExists):
		status = http.StatusConflict
	case errors.Is(err, ErrFileRefused):
		status = http.StatusForbidden
	case errors.Is(err, ErrFileBadPath):
		status = http.StatusBadRequest
	case errors.Is(err, ErrFileUnavailable):
		status = http.StatusServiceUnavailable
	case errors.Is(err, errUploadCut):
		status, code, msg = http.StatusBadRequest, "upload_cut", errUploadCut.Error()
	}
	if code == "" {
		switch status {
		case http.StatusNotFound:
			code, msg = "file_not_found", "there is no file at this path"
		case http.StatusConflict:
			code, msg = "file_exists", "a file is already there: tick Replace to overwrite it"
		case http.StatusForbidden:
			code, msg = "path_refused", "this path is refused"
		case http.StatusBadRequest:
			code, msg = "bad_path", "this is not a file's path"
		case http.StatusServiceUnavailable:
			code, msg = "transfer_unavailable", "this session cannot move files right now; see tandem's log"
		default:
			s.log.Error("web: file transfer failed", "err", err)
			code, msg = "internal", "the transfer failed; see tandem's log"
		}
	}
	writeError(w, status, code, msg)
}

// errUploadCut is the error of an upload whose body ended early.
var errUploadCut = errors.New("the upload ended before all of its bytes came (the browser went away?); nothing was written")

// cutGuard turns a request body's early end (net/http's
// io.ErrUnexpectedEOF, for a connection closed before its Content-Length
// or last chunk) into errUploadCut: a reader such as io.ReadFull's caller
// could take io.ErrUnexpectedEOF for a short last read, and keep half a
// file as if whole.
type cutGuard struct{ r io.Reader }

func (g cutGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errUploadCut
	}
	return n, err
}
