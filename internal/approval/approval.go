package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Action is what an approval is for: one tool call in one session.
type Action struct {
	Tenant      string `json:"tenant"`
	Actor       string `json:"actor"`
	SessionID   string `json:"sessionId"`
	SessionName string `json:"sessionName"`
	Target      string `json:"target"`
	Tool        string `json:"tool"`
	// Command and Cwd are set for command tools.
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	// Parent, set for a program that a command started (a local session's
	// exec, judged as it starts), is the agent's command line that started
	// it; Command is then the program's argv, quoted, and Cwd its own
	// directory.
	Parent string `json:"parent,omitempty"`
}

// Fingerprint binds an approval to its action: the SHA-256 of the
// normalized action (tool, command without surrounding blank space, cwd,
// target, tenant) and the session id, so it never authorizes another
// session, tenant, target, directory or command.
func Fingerprint(a Action) string {
	fields := []string{"tandem-approval-v1", a.SessionID, a.Tenant, a.Target, a.Tool, strings.TrimSpace(a.Command), a.Cwd}
	if a.Parent != "" {
		// An exec's approval never stands for the same words as a line.
		fields = append(fields, "exec", a.Parent)
	}
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Status is where an approval stands.
type Status string

// The statuses of an approval.
const (
	Pending  Status = "pending"
	Approved Status = "approved"
	Denied   Status = "denied"
	Expired  Status = "expired" // no answer in time: a denial
)

// Who decided.
const (
	ByDashboard = "dashboard"
	ByClient    = "client"
	ByUpstream  = "upstream"
	ByTimeout   = "timeout"
	ByRestart   = "restart"
	ByShutdown  = "shutdown"
)

// ReasonShutdown is the reason of the approvals that a graceful shutdown
// denies, as server_restart is that of a process that died.
const ReasonShutdown = "server_shutdown"

// Request is one pending approval as approvers see it.
type Request struct {
	ID          string    `json:"id"`
	Action      Action    `json:"action"`
	Fingerprint string    `json:"fingerprint"`
	Rule        string    `json:"rule,omitempty"`   // the policy rule that asked
	Reason      string    `json:"reason,omitempty"` // why the policy asked
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
}

// Decision is the answer to a request.
type Decision struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	By       string `json:"by"`
	// Approver names who answered, e.g. the dashboard operator; may be empty.
	Approver string `json:"approver,omitempty"`
	// Remember allows the same fingerprint again in the same session for
	// this long (approvals only). JSON carries it in milliseconds.
	Remember time.Duration `json:"-"`
	At       time.Time     `json:"at"`
}

// MarshalJSON writes Remember as rememberMs, in milliseconds.
func (d Decision) MarshalJSON() ([]byte, error) {
	type plain Decision
	return json.Marshal(struct {
		plain
		RememberMs int64 `json:"rememberMs,omitempty"`
	}{plain(d), d.Remember.Milliseconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Decision) UnmarshalJSON(b []byte) error {
	type plain Decision
	var v struct {
		plain
		RememberMs int64 `json:"rememberMs"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Decision(v.plain)
	d.Remember = time.Duration(v.RememberMs) * time.Millisecond
	return nil
}

// Approval is a request and, once answered, its decision.
type Approval struct {
	Request
	Status   Status    `json:"status"`
	Decision *Decision `json:"decision,omitempty"`
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "apr_" + base64.RawURLEncoding.EncodeToString(b)
}
