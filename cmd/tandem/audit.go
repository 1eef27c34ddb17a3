package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/server"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

func auditCmd(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Check and read the audit log",
		Long: "Every tool call and session event is recorded in a hash-chained audit log in the data dir. " +
			"verify proves the chain intact; tail shows recent records.",
		Args: cobra.NoArgs,
	}
	c.AddCommand(auditVerifyCmd(stdout), auditTailCmd(stdout), auditRawKeysCmd(stdout), auditRawCmd(stdout))
	return c
}

func auditVerifyCmd(stdout io.Writer) *cobra.Command {
	var dataDir, storeURL string
	c := &cobra.Command{
		Use:   "verify",
		Short: "Check every record of the audit chain; exit 1 naming the first broken one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := openAuditStore(ctx, dataDir, storeURL)
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := audit.Verify(ctx, st)
			var broken *audit.BrokenError
			if errors.As(err, &broken) {
				fmt.Fprintf(stdout, "audit chain BROKEN at record %d: %s\n", broken.Seq, broken.Reason)
				if n > 0 {
					fmt.Fprintf(stdout, "records 1-%d are intact\n", n)
				}
				if r, ok := auditRecordAt(ctx, st, broken.Seq); ok {
					fmt.Fprintln(stdout, "record as stored:")
					_ = writeAuditJSON(stdout, []store.AuditRecord{r})
				}
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "audit chain intact: %d records\n", n)
			return err
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "state directory (default $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&storeURL, "store", "", storeFlagHelp)
	return c
}

type auditTailFlags struct {
	dataDir string
	store   string
	session string
	tenant  string
	json    bool
	n       int
}

func auditTailCmd(stdout io.Writer) *cobra.Command {
	var f auditTailFlags
	c := &cobra.Command{
		Use:   "tail",
		Short: "Show the most recent audit records, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.n < 1 {
				return fmt.Errorf("--lines must be at least 1, not %d", f.n)
			}
			st, err := openAuditStore(cmd.Context(), f.dataDir, f.store)
			if err != nil {
				return err
			}
			defer st.Close()
			recs, err := st.TailAudit(cmd.Context(), f.n, store.AuditFilter{SessionName: f.session, Tenant: f.tenant})
			if err != nil {
				return err
			}
			nameConnections(cmd.Context(), st, recs)
			if f.json {
				return writeAuditJSON(stdout, recs)
			}
			return writeAuditTable(stdout, recs)
		},
	}
	c.Flags().StringVar(&f.dataDir, "data-dir", "", "state directory (default $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&f.store, "store", "", storeFlagHelp)
	c.Flags().StringVar(&f.session, "session", "", "only records of the session with this name")
	c.Flags().StringVar(&f.tenant, "tenant", "", "only records of this tenant")
	c.Flags().BoolVar(&f.json, "json", false, "one JSON object per line instead of a table")
	c.Flags().IntVarP(&f.n, "lines", "n", 20, "how many records")
	return c
}

// storeFlagHelp describes --store wherever a command takes it.
const storeFlagHelp = "the store tandem serve uses: a postgres:// URL (default: SQLite in the data dir)"

// openAuditStore opens the store of a data dir that must already hold one
// (reading an audit log should not create an empty one somewhere else), or
// the PostgreSQL store that storeURL names.
func openAuditStore(ctx context.Context, dataDir, storeURL string) (store.Store, error) {
	if dataDir == "" {
		home, _ := os.UserHomeDir()
		dataDir = server.DefaultDataDir(home)
	}
	if storeURL != "" {
		st, _, err := server.OpenStore(ctx, dataDir, storeURL)
		return st, err
	}
	if _, err := os.Stat(filepath.Join(dataDir, sqlite.FileName)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no audit log in %s: tandem has not run with this --data-dir", dataDir)
		}
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return sqlite.Open(ctx, dataDir)
}

// auditRecordAt finds one record by seq, if it can still be read.
func auditRecordAt(ctx context.Context, st store.Store, seq int64) (store.AuditRecord, bool) {
	var found store.AuditRecord
	stop := errors.New("found")
	err := st.ScanAudit(ctx, func(r store.AuditRecord) error {
		if r.Seq == seq {
			found = r
			return stop
		}
		return nil
	})
	return found, errors.Is(err, stop)
}

func writeAuditJSON(w io.Writer, recs []store.AuditRecord) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if len(r.Args) > 0 && !json.Valid(r.Args) {
			// Only a tampered row has invalid args; show them as a string.
			r.Args, _ = json.Marshal(string(r.Args))
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func writeAuditTable(w io.Writer, recs []store.AuditRecord) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "no audit records")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME (UTC)\tEVENT\tSESSION\tTOOL\tOUTCOME\tEXIT\tDURATION\tACTOR\tDETAIL")
	for _, r := range recs {
		exit := "-"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		detail := r.Reason
		if detail == "" {
			detail = string(r.Args)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Seq, r.Time.UTC().Format("2006-01-02 15:04:05.000"), clean(r.Event, 20), dash(clean(r.SessionName, 24)),
			dash(clean(r.Tool, 24)), dash(clean(r.Outcome, 24)), exit, time.Duration(r.DurationMs)*time.Millisecond,
			dash(actorCell(r.Actor)), clean(detail, 80))
	}
	return tw.Flush()
}

// nameConnections names the stdio connections of records that carry only
// the connection id (a session's start and end, written by the session
// layer) by the client the connection's own calls name in the same
// session ("claude-code 2.1.0 (conn-…)"), as the dashboard does. A record
// whose connection is not named anywhere near keeps its id.
func nameConnections(ctx context.Context, st store.Store, recs []store.AuditRecord) {
	names := map[string]string{} // conn id -> labelled actor
	for _, r := range recs {
		if _, id, ok := mcp.AuditClient(r.Actor); ok {
			names[id] = r.Actor
		}
	}
	looked := map[[2]string]bool{}
	for i, r := range recs {
		if !strings.HasPrefix(r.Actor, "conn-") {
			continue
		}
		key := [2]string{r.Tenant, r.SessionName}
		if _, ok := names[r.Actor]; !ok && r.SessionName != "" && !looked[key] {
			looked[key] = true
			near, err := st.TailAudit(ctx, 200, store.AuditFilter{SessionName: r.SessionName, Tenant: r.Tenant})
			if err == nil {
				for _, n := range near {
					if _, id, ok := mcp.AuditClient(n.Actor); ok {
						names[id] = n.Actor
					}
				}
			}
		}
		if label, ok := names[r.Actor]; ok {
			recs[i].Actor = label
		}
	}
}

// actorCell is the table's actor: a stdio client by the name it declared,
// with its whole connection id after it (the dashboard's name for it);
// any other actor cut to 24 runes.
func actorCell(actor string) string {
	if client, id, ok := mcp.AuditClient(actor); ok {
		return clean(client, 40) + " (" + clean(id, 40) + ")"
	}
	return clean(actor, 24)
}

// clean makes a stored string safe for one table cell: no control
// characters (a terminal would act on them, and tabs or newlines would
// break the table), no bidi overrides, at most limit runes.
func clean(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return '?'
		}
		return r
	}, s)
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-1]) + "…"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
