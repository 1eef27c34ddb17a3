package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// auditDataDir makes a data dir whose log holds a session start, then
// tool calls alternating between sessions "dev" and "ops", then an end.
func auditDataDir(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := audit.New(st)
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	exit := 0
	recs := []audit.Record{{Event: audit.EventSessionStart, SessionName: "dev", Actor: "conn-1", Outcome: audit.OutcomeOK}}
	for i := range 6 {
		recs = append(recs, audit.Record{
			Event: audit.EventToolCall, Tool: "ssh_exec", SessionName: []string{"dev", "ops"}[i%2], Actor: "conn-1",
			Args:    json.RawMessage(fmt.Sprintf(`{"command":"echo %d","sessionToken":"secret-token"}`, i)),
			Outcome: audit.OutcomeOK, ExitCode: &exit, DurationMs: int64(10 * i),
		})
	}
	recs = append(recs, audit.Record{Event: audit.EventSessionEnd, SessionName: "dev", Reason: "server_restart\x1b[31m"})
	for i, r := range recs {
		r.Time = at.Add(time.Duration(i) * time.Second)
		if _, err := log.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runCLI runs tandem's CLI in-process and returns what it printed.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func TestAuditCLIVerify(t *testing.T) {
	good := auditDataDir(t)
	broken := auditDataDir(t)
	db, err := sql.Open("sqlite", filepath.Join(broken, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER audit_no_update`, `UPDATE audit SET args = '{"command":"echo nothing to see"}' WHERE seq = 4`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()

	for _, tc := range []struct {
		name    string
		dir     string
		wantOut []string
		wantErr string
	}{
		{"intact", good, []string{"audit chain intact: 8 records\n"}, ""},
		{"tampered", broken, []string{
			"audit chain BROKEN at record 4: hash mismatch (record altered)",
			"records 1-3 are intact",
			`"seq":4`, `"command":"echo nothing to see"`,
		}, "audit chain broken: record 4: hash mismatch (record altered)"},
		{"no data dir", filepath.Join(t.TempDir(), "nothing"), nil, "no audit log in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, "audit", "verify", "--data-dir", tc.dir)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v; want %q", err, tc.wantErr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	var be *audit.BrokenError
	if _, _, err := runCLI(t, "audit", "verify", "--data-dir", broken); !errors.As(err, &be) || be.Seq != 4 {
		t.Fatalf("err = %v; want a *audit.BrokenError for record 4", err)
	}

	// The real binary exits 1 and says why, the way a script sees it.
	cmd := exec.Command(binary, "audit", "verify", "--data-dir", broken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 ||
		stderr.String() != "tandem: audit chain broken: record 4: hash mismatch (record altered)\n" {
		t.Fatalf("binary: %v, stderr %q", err, stderr.String())
	}
	if out, err := exec.Command(binary, "audit", "verify", "--data-dir", good).Output(); err != nil || string(out) != "audit chain intact: 8 records\n" {
		t.Fatalf("binary on an intact log: %v, %q", err, out)
	}
}

func TestAuditCLITail(t *testing.T) {
	dir := auditDataDir(t)
	for _, tc := range []struct {
		name     string
		args     []string
		wantSeqs []int64
	}{
		{"default 20", nil, []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"last 3", []string{"-n", "3"}, []int64{6, 7, 8}},
		{"session", []string{"--session", "ops"}, []int64{3, 5, 7}},
		{"session last 2", []string{"--session", "dev", "--lines", "2"}, []int64{6, 8}},
		{"unknown session", []string{"--session", "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := append([]string{"audit", "tail", "--data-dir", dir}, tc.args...)

			out, _, err := runCLI(t, append(base, "--json")...)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for line := range strings.Lines(out) {
				var r audit.Record
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				if strings.Contains(line, "secret-token") {
					t.Fatalf("a session token reached the log: %s", line)
				}
				got = append(got, r.Seq)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantSeqs) {
				t.Errorf("--json seqs = %v; want %v", got, tc.wantSeqs)
			}

			out, _, err = runCLI(t, base...)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(tc.wantSeqs) == 0 {
				if out != "no audit records\n" {
					t.Errorf("table for no records = %q", out)
				}
				return
			}
			if !strings.HasPrefix(lines[0], "SEQ") || len(lines) != len(tc.wantSeqs)+1 {
				t.Fatalf("table:\n%s", out)
			}
			for i, seq := range tc.wantSeqs {
				if !strings.HasPrefix(lines[i+1], fmt.Sprint(seq)+" ") {
					t.Errorf("row %d = %q; want seq %d", i, lines[i+1], seq)
				}
			}
		})
	}

	out, _, err := runCLI(t, "audit", "tail", "--data-dir", dir, "-n", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"2026-05-01 09:00:06.000", "tool_call", "ssh_exec", `{"command":"echo 5","sessionToken":"[redacted]"}`, "50ms",
		"session_end", "server_restart?[31m"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
	if _, _, err := runCLI(t, "audit", "tail", "--data-dir", dir, "-n", "0"); err == nil {
		t.Error("-n 0 accepted")
	}

	// Without --data-dir, the serve default applies: $XDG_STATE_HOME/tandem.
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	if _, _, err := runCLI(t, "audit", "tail"); err == nil || !strings.Contains(err.Error(), filepath.Join(xdg, "tandem")) {
		t.Fatalf("default data dir: %v; want it to name %s", err, filepath.Join(xdg, "tandem"))
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(xdg, "tandem"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	if out, _, err := runCLI(t, "audit", "verify"); err != nil || out != "audit chain intact: 0 records\n" {
		t.Fatalf("verify in the default data dir: %v, %q", err, out)
	}
}
