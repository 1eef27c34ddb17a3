package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/transfer"
	"github.com/tandem-sh/tandem/internal/web"
)

// humanFiles moves files between the monitoring page and a session's
// workspace for a viewer who may type there: the same transfer (SFTP, or
// the sandbox's own file server), path rules and size limits as the
// agent's ssh_upload and ssh_download. Each transfer, and each refusal,
// is an audit record (user_file: path, size, SHA-256, the viewer as
// actor; never content), and each transfer is told on the agent's next
// reply (userFiles).
type humanFiles struct {
	policies func(tenant, target string) mcp.Policy
	audit    *audit.Log
	// auditContinue (audit.onFailure: continue) lets a transfer go
	// unrecorded when the audit log cannot take records, as calls do.
	auditContinue    bool
	upload, download int64
	log              *slog.Logger
}

// The tools a human's transfer is judged as: a rule for ssh_upload binds
// the page's upload too.
const (
	uploadTool   = "ssh_upload"
	downloadTool = "ssh_download"
)

// copyBuffer is how much a download asks of the file channel at once:
// enough for many SFTP requests in flight.
const copyBuffer = 1 << 20

// FileLimits are the configured limits of one upload and one download.
func (t webTerminal) FileLimits() (upload, download int64) { return t.files.upload, t.files.download }

// PutFile writes a viewer's upload into the session's workspace.
func (t webTerminal) PutFile(ctx context.Context, p string, body io.Reader, overwrite bool) (web.FileMoved, error) {
	return t.files.put(ctx, t.Session, p, body, overwrite)
}

// GetFile copies a file of the session's workspace to a viewer.
func (t webTerminal) GetFile(ctx context.Context, p string, start func(size int64) io.Writer) (web.FileMoved, error) {
	return t.files.get(ctx, t.Session, p, start)
}

var _ web.FileDesk = webTerminal{}

// prepare checks what every transfer needs before it moves a byte: the
// audit log takes records, the session serves files, the path lies in
// the workspace, and no policy rule denies it. It returns the session's
// files, the real path and the path relative to the workspace.
func (h *humanFiles) prepare(ctx context.Context, sess *session.Session, tool, p string) (transfer.Files, string, string, error) {
	if h.audit != nil && !h.auditContinue {
		actx, cancel := context.WithTimeout(ctx, auditWait)
		err := h.audit.Ready(actx)
		cancel()
		if err != nil {
			h.log.Error("web: a file transfer cannot be recorded; none was made", "err", err)
			return nil, "", "", &web.FileError{Kind: web.ErrFileUnavailable, Code: codeAuditUnavailable,
				Message: "the audit log cannot record the transfer right now, so none was made; see tandem's log"}
		}
	}
	files, err := sess.Files(ctx)
	if err != nil {
		return nil, "", "", fileError(err)
	}
	real, err := files.Resolve(ctx, p)
	if err != nil {
		return nil, "", "", fileError(err)
	}
	rel := transfer.Rel(files.Root(), real)
	c := sess.Caller()
	judge := h.policies(c.Tenant, sess.Target.Name).Judge
	if judge == nil {
		return files, real, rel, nil
	}
	v := judge.Decide(policy.Input{Tool: tool, Path: rel, HasPath: true})
	if v.Decision == policy.Deny {
		sess.NoteDenied(session.Denial{Tool: tool, Command: rel, Rule: v.Rule, At: time.Now()})
		return nil, "", "", &web.FileError{Kind: web.ErrFileRefused, Code: "policy_denied",
			Message: fmt.Sprintf("the policy's %s denies %s", v.Rule, rel)}
	}
	// ask and forward hold the agent's transfer for a human; the human on
	// the page is the one who would be asked.
	return files, real, rel, nil
}

// put is PutFile.
func (h *humanFiles) put(ctx context.Context, sess *session.Session, p string, body io.Reader, overwrite bool) (web.FileMoved, error) {
	files, real, rel, err := h.prepare(ctx, sess, uploadTool, p)
	if err != nil {
		h.refused(ctx, sess, session.FileUpload, p, err)
		return web.FileMoved{}, err
	}
	res, err := files.Put(ctx, real, body, transfer.PutOptions{Overwrite: overwrite, MaxBytes: h.upload, LimitName: "limits.uploadBytes"})
	if err != nil {
		err = fileError(err)
		h.record(ctx, sess, session.FileUpload, rel, res, err)
		return web.FileMoved{}, err
	}
	return h.moved(ctx, sess, session.FileUpload, rel, res), nil
}

// get is GetFile.
func (h *humanFiles) get(ctx context.Context, sess *session.Session, p string, start func(size int64) io.Writer) (web.FileMoved, error) {
	files, real, rel, err := h.prepare(ctx, sess, downloadTool, p)
	if err != nil {
		h.refused(ctx, sess, session.FileDownload, p, err)
		return web.FileMoved{}, err
	}
	f, err := files.Open(ctx, real)
	if err != nil {
		err = fileError(err)
		h.record(ctx, sess, session.FileDownload, rel, transfer.Result{}, err)
		return web.FileMoved{}, err
	}
	defer f.Close()
	if f.Size > h.download {
		err := fileError(&transfer.LimitError{Limit: h.download, Name: "limits.downloadBytes"})
		h.record(ctx, sess, session.FileDownload, rel, transfer.Result{Bytes: f.Size}, err)
		return web.FileMoved{}, err
	}
	sum := sha256.New()
	w := io.MultiWriter(start(f.Size), sum)
	n, err := io.CopyBuffer(w, io.NewSectionReader(f, 0, f.Size), make([]byte, copyBuffer))
	if err == nil && n != f.Size {
		err = fmt.Errorf("the file shrank from %d to %d bytes while it was read", f.Size, n)
	}
	res := transfer.Result{Path: f.Path, Bytes: n}
	if err != nil {
		h.record(ctx, sess, session.FileDownload, rel, res, fmt.Errorf("cut short: %w", err))
		return web.FileMoved{}, err
	}
	res.SHA256 = hex.EncodeToString(sum.Sum(nil))
	return h.moved(ctx, sess, session.FileDownload, rel, res), nil
}

// moved records a finished transfer and tells the agent's next reply.
func (h *humanFiles) moved(ctx context.Context, sess *session.Session, dir, rel string, res transfer.Result) web.FileMoved {
	h.record(ctx, sess, dir, rel, res, nil)
	sess.FileMoved(session.UserFile{Path: rel, Bytes: res.Bytes, SHA256: res.SHA256, Viewer: web.ViewerFrom(ctx), Direction: dir, At: time.Now()})
	return web.FileMoved{Path: rel, Bytes: res.Bytes, SHA256: res.SHA256}
}

// refused records a transfer refused before it began, unless the refusal
// is that the audit log takes no records.
func (h *humanFiles) refused(ctx context.Context, sess *session.Session, dir, p string, err error) {
	var fe *web.FileError
	if errors.As(err, &fe) && fe.Code == codeAuditUnavailable {
		return
	}
	h.record(ctx, sess, dir, p, transfer.Result{}, err)
}

// auditWait bounds how long a transfer waits for the audit log to take
// records (another process may hold its write lock a moment).
const auditWait = 5 * time.Second

// codeAuditUnavailable refuses a transfer the audit log cannot record.
const codeAuditUnavailable = "audit_unavailable"

// record appends the audit record of one transfer or refusal.
func (h *humanFiles) record(ctx context.Context, sess *session.Session, dir, p string, res transfer.Result, failed error) {
	if h.audit == nil {
		return
	}
	args := map[string]any{"path": p, "direction": dir}
	rec := audit.Record{Time: time.Now(), Tenant: sess.Caller().Tenant, Actor: web.ViewerFrom(ctx), SessionID: sess.ID,
		SessionName: sess.Name, Target: sess.Target.Name, Workspace: sess.Target.Workspace,
		Tool: audit.EventUserFile, Event: audit.EventUserFile, Outcome: audit.OutcomeOK}
	if failed == nil {
		args["bytes"], args["sha256"] = res.Bytes, res.SHA256
		rec.Reason = fmt.Sprintf("a human %sed %s (%d bytes) on the monitoring page", dir, p, res.Bytes)
	} else {
		rec.Outcome, rec.Reason = "refused", failed.Error()
		var fe *web.FileError
		if errors.As(failed, &fe) {
			rec.Outcome = fe.Code
		}
	}
	rec.Args, _ = json.Marshal(args)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := h.audit.Append(actx, rec); err != nil {
		h.log.Error("audit append failed", "event", audit.EventUserFile, "err", err)
	}
}

// fileKind is how the page sorts a code of mcp.TransferCode: nil for
// none of them.
func fileKind(code string) error {
	switch code {
	case "path_outside_workspace", "file_access_denied":
		return web.ErrFileRefused
	case "file_not_found":
		return web.ErrFileNotFound
	case "file_exists":
		return web.ErrFileExists
	case "file_too_large":
		return web.ErrFileTooLarge
	case "not_a_file", "invalid_arguments":
		return web.ErrFileBadPath
	case "transfer_unavailable":
		return web.ErrFileUnavailable
	}
	return nil
}

// fileError is a transfer error as the page shows it: its kind, the
// stable code the agent's ssh_upload and ssh_download answer with, and the
// sentence that names the rule.
func fileError(err error) error {
	var fe *web.FileError
	if errors.As(err, &fe) {
		return err
	}
	msg := err.Error()
	var pe *transfer.PathError
	if errors.As(err, &pe) {
		msg = pe.Error()
	}
	code := mcp.TransferCode(err)
	kind := fileKind(code)
	if kind == nil {
		return err
	}
	switch {
	case errors.Is(err, transfer.ErrBadPath):
		code = "bad_path" // the page's own code for a path that is none (package web's too)
	case errors.Is(err, transfer.ErrExists):
		msg = "a file is already there: tick Replace to overwrite it"
	}
	return &web.FileError{Kind: kind, Code: code, Message: msg}
}
