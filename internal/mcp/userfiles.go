package mcp

import (
	"time"

	"github.com/tandem-sh/tandem/internal/session"
)

// userFilesHint is the one sentence that explains userFiles.
const userFilesHint = "A human on the monitoring page moved files since your last reply: userFiles lists each (upload: they put it into the workspace, replacing any file of that name; download: they took a copy); the sha256 is of the bytes moved, so you can tell whether the file still holds them."

// addUserFiles reports, on the reply of any call that names a session,
// the files viewers uploaded into its workspace or downloaded from it
// since the agent was last told: each once. The transfers were audited
// when they happened.
func addUserFiles(info *call, r reply) {
	if info.sess == nil || r == nil || info.input != nil || info.raw != nil {
		return // a reply that is not sent tells nothing
	}
	fs := info.sess.TakeUserFiles()
	if len(fs) == 0 {
		return
	}
	list := make([]any, 0, len(fs))
	for _, f := range fs {
		list = append(list, userFileReply(f))
	}
	r["userFiles"] = list
	r["userFilesHint"] = userFilesHint
}

// userFileReply renders one moved file for the agent.
func userFileReply(f session.UserFile) reply {
	return reply{"path": f.Path, "bytes": f.Bytes, "sha256": f.SHA256, "viewer": f.Viewer,
		"direction": f.Direction, "at": f.At.UTC().Format(time.RFC3339Nano)}
}

// userFileFields are the reply fields of addUserFiles, which any reply
// that names a session may carry.
var userFileFields = schema{
	"userFiles":     arrayOf("Any reply that names a session: the files a human on the monitoring page uploaded into the workspace or downloaded from it since your last reply, oldest first, each told once.", userFileSchema),
	"userFilesHint": typed("string", "With userFiles: what it means, in one sentence."),
}

var userFileSchema = object("One file a human moved.", schema{
	"path":      typed("string", "The file's path, as ssh_upload and ssh_download name it."),
	"bytes":     typed("integer", "Its size in bytes."),
	"sha256":    typed("string", "The SHA-256 of the bytes moved, in hex."),
	"viewer":    typed("string", "Who: a browser signed in as the operator, an admitted browser, tandem attach; with its address."),
	"direction": schema{"type": "string", "enum": []string{session.FileUpload, session.FileDownload}, "description": "upload: into the workspace; download: a copy taken out."},
	"at":        typed("string", "When the transfer finished (RFC 3339)."),
})
