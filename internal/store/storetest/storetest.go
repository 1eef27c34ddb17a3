// Package storetest is the conformance suite of [store.Store]: the
// semantics every backend must have, as tests. A backend's own tests call
// [Run]; store/sqlite and store/postgres both do, so `go test ./...` checks
// both against the same expectations.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// Backend is what the suite needs from a backend.
type Backend struct {
	// NewDB creates a new, empty database for t, removed at t's cleanup,
	// and returns where it is: what Open takes (a directory, a URL).
	NewDB func(t *testing.T) string
	// Open opens a handle on the database at where, as a tandem process
	// would: every handle has its own connections, so two handles contend
	// the way two processes do. The suite closes what it opens.
	Open func(ctx context.Context, where string) (store.Store, error)
}

// Run runs the conformance suite against b, each test on a database of
// its own.
func Run(t *testing.T, b Backend) {
	s := &suite{b: b}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"OpenConcurrently", s.openConcurrently},
		{"Instances", s.instances},
		{"Sessions", s.sessions},
		{"EndSessionsOfRace", s.endSessionsOfRace},
		{"Commands", s.commands},
		{"Replays", s.replays},
		{"RecordedSessions", s.recordedSessions},
		{"AuditAppend", s.auditAppend},
		{"AuditRoundTrip", s.auditRoundTrip},
		{"AuditTail", s.auditTail},
		{"AuditScan", s.auditScan},
		{"AuditConcurrentAppends", s.auditConcurrent},
		{"Writable", s.writable},
		{"Revocations", s.revocations},
		{"Approvals", s.approvals},
		{"DenyApprovalsOfRace", s.denyApprovalsOfRace},
		{"Close", s.close},
	} {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct{ b Backend }

// fresh opens a handle on a new database and returns it with the
// database's location, for opening more handles.
func (s *suite) fresh(t *testing.T) (store.Store, string) {
	t.Helper()
	where := s.b.NewDB(t)
	return s.open(t, where), where
}

// open opens one more handle on where, closed at t's cleanup.
func (s *suite) open(t *testing.T, where string) store.Store {
	t.Helper()
	st, err := s.b.Open(context.Background(), where)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// t0 is a fixed instant with nanoseconds and a non-UTC zone, to check that
// times come back in UTC, and exactly where the contract says so.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))

// sameTime compares times other than an audit record's, which backends
// keep at least to the microsecond; it also wants got in UTC.
func sameTime(got, want time.Time) bool {
	if got.IsZero() || want.IsZero() {
		return got.IsZero() == want.IsZero()
	}
	return got.Location() == time.UTC && got.Truncate(time.Microsecond).Equal(want.Truncate(time.Microsecond))
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (s *suite) openConcurrently(t *testing.T) {
	ctx := context.Background()
	where := s.b.NewDB(t)
	// Several handles opening a new database at once set the schema up once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			st, err := s.b.Open(ctx, where)
			if err == nil {
				err = st.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustNil(t, err)
	}
	// Reopening keeps the data.
	st, err := s.b.Open(ctx, where)
	mustNil(t, err)
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i1", PID: 1, Host: "h", StartedAt: t0}))
	mustNil(t, st.Close())
	st = s.open(t, where)
	if in, err := st.Instance(ctx, "i1"); err != nil || in.ID != "i1" {
		t.Fatalf("after reopen: %+v, %v; want instance i1", in, err)
	}
}

func (s *suite) instances(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	for _, in := range []store.Instance{
		{ID: "old", PID: 10, Host: "a", StartedAt: t0},
		{ID: "live", PID: 11, Host: "a", URL: "https://10.0.0.7:8443", StartedAt: t0},
		{ID: "ended", PID: 12, Host: "b", StartedAt: t0},
	} {
		mustNil(t, st.RegisterInstance(ctx, in))
	}
	if err := st.RegisterInstance(ctx, store.Instance{ID: "old", StartedAt: t0}); err == nil {
		t.Fatal("registering an existing id succeeded")
	}
	mustNil(t, st.Heartbeat(ctx, "live", t0.Add(time.Minute)))
	mustNil(t, st.EndInstance(ctx, "ended", t0.Add(time.Second)))
	mustNil(t, st.EndInstance(ctx, "ended", t0.Add(time.Hour))) // twice: a no-op

	dead, err := st.DeadInstances(ctx, t0.Add(30*time.Second))
	mustNil(t, err)
	if len(dead) != 1 || dead[0].ID != "old" || dead[0].PID != 10 || dead[0].Host != "a" ||
		!sameTime(dead[0].StartedAt, t0) || !sameTime(dead[0].HeartbeatAt, t0) || !dead[0].EndedAt.IsZero() {
		t.Fatalf("dead = %+v; want only old", dead)
	}
	if dead, err := st.DeadInstances(ctx, t0); err != nil || len(dead) != 0 {
		t.Fatalf("heartbeat exactly at staleBefore counted dead: %+v, %v", dead, err)
	}
	if dead, err := st.DeadInstances(ctx, t0.Add(2*time.Minute)); err != nil || len(dead) != 2 || dead[0].ID != "old" || dead[1].ID != "live" {
		t.Fatalf("dead later = %+v, %v; want old then live, oldest heartbeat first", dead, err)
	}

	live, err := st.Instance(ctx, "live")
	mustNil(t, err)
	if live.ID != "live" || live.PID != 11 || live.URL != "https://10.0.0.7:8443" || !sameTime(live.HeartbeatAt, t0.Add(time.Minute)) || !live.EndedAt.IsZero() {
		t.Errorf("Instance(live) = %+v", live)
	}
	ended, err := st.Instance(ctx, "ended")
	mustNil(t, err)
	if !sameTime(ended.EndedAt, t0.Add(time.Second)) {
		t.Errorf("Instance(ended) = %+v; want its first end kept", ended)
	}

	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"heartbeat unknown", st.Heartbeat(ctx, "nope", t0), store.ErrNotFound},
		{"heartbeat ended", st.Heartbeat(ctx, "ended", t0), store.ErrInstanceEnded},
		{"end unknown", st.EndInstance(ctx, "nope", t0), store.ErrNotFound},
		{"instance unknown", func() error { _, err := st.Instance(ctx, "nope"); return err }(), store.ErrNotFound},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v; want %v", tc.name, tc.err, tc.want)
		}
	}
}

func session(id, name, instance string, created time.Time) store.SessionRow {
	h := sha256.Sum256([]byte("token-" + id))
	return store.SessionRow{
		ID: id, Name: name, Tenant: "default", Actor: "alice", Owner: "conn-" + instance, InstanceID: instance,
		Target: "local", Kind: "local", Host: "localhost", Port: 22, Username: "u",
		TokenHash: h[:], CreatedAt: created,
	}
}

func ids(rs []store.SessionRow) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.ID)
	}
	return strings.Join(s, " ")
}

func (s *suite) sessions(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	for _, id := range []string{"dead", "alive"} {
		mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: id, PID: 1, Host: "h", StartedAt: t0}))
	}
	rows := []store.SessionRow{
		session("s1", "dev", "dead", t0),
		session("s2", "ops", "dead", t0.Add(time.Second)),
		session("s3", "dev", "alive", t0.Add(2*time.Second)),
		session("s4", "dev", "dead", t0.Add(3*time.Second)),
		session("s7", "dev", "alive", t0.Add(4*time.Second)),
	}
	rows[1].Name, rows[1].Username = "ops ☃ é", "ünï"
	rows[3].Owner = "conn-other" // a caller's active names are unique
	// Another actor whose tokens carry the same sid (owner) is another
	// caller: its "dev" is its own.
	rows[4].Actor, rows[4].Owner = "bob", "conn-dead"
	for _, r := range rows {
		mustNil(t, st.CreateSession(ctx, r))
	}

	bad := session("s5", "x", "dead", t0)
	bad.TokenHash = []byte("short")
	for name, err := range map[string]error{
		"short token hash": st.CreateSession(ctx, bad),
		"unknown instance": st.CreateSession(ctx, session("s6", "x", "ghost", t0)),
		"duplicate id":     st.CreateSession(ctx, rows[0]),
	} {
		if err == nil {
			t.Errorf("%s: create succeeded", name)
		}
	}

	active, err := st.ActiveSessions(ctx)
	mustNil(t, err)
	if ids(active) != "s1 s2 s3 s4 s7" {
		t.Fatalf("active = %s; want oldest first", ids(active))
	}
	for _, tc := range []struct{ tenant, actor, owner, want string }{
		{"default", "alice", "conn-dead", "s1 s2"},
		{"default", "bob", "conn-dead", "s7"},
		{"default", "alice", "conn-other", "s4"},
		{"default", "mallory", "conn-dead", ""}, // another actor with the same sid
		{"default", "", "conn-dead", ""},
		{"other", "alice", "conn-dead", ""}, // another tenant's owner of that name
		{"default", "alice", "conn-nobody", ""},
	} {
		of, err := st.ActiveSessionsOf(ctx, tc.tenant, tc.actor, tc.owner)
		mustNil(t, err)
		if ids(of) != tc.want {
			t.Fatalf("ActiveSessionsOf(%s, %s, %s) = %q; want %q", tc.tenant, tc.actor, tc.owner, ids(of), tc.want)
		}
	}
	want := rows[0]
	want.Status = store.StatusActive
	got := active[0]
	if !sameTime(got.CreatedAt, want.CreatedAt) || !got.EndedAt.IsZero() {
		t.Fatalf("active[0] times = %v, %v", got.CreatedAt, got.EndedAt)
	}
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("active[0] =\n%+v\nwant\n%+v", got, want)
	}
	if active[1].Name != rows[1].Name || active[1].Username != rows[1].Username {
		t.Errorf("non-ASCII text came back as %q, %q", active[1].Name, active[1].Username)
	}

	for _, tc := range []struct{ tenant, actor, owner, name, want string }{
		{"default", "alice", "conn-dead", "dev", "s1"},
		{"default", "bob", "conn-dead", "dev", "s7"},
		{"default", "mallory", "conn-dead", "dev", ""},
		{"default", "alice", "conn-other", "dev", "s4"},
		{"default", "alice", "conn-alive", "dev", "s3"},
		{"default", "alice", "conn-dead", rows[1].Name, "s2"},
		{"other", "alice", "conn-dead", "dev", ""},
		{"default", "alice", "conn-nobody", "dev", ""},
	} {
		got, err := st.ActiveSession(ctx, tc.tenant, tc.actor, tc.owner, tc.name)
		switch {
		case tc.want == "" && !errors.Is(err, store.ErrNotFound):
			t.Errorf("ActiveSession(%s, %s, %s, %s) = %+v, %v; want ErrNotFound", tc.tenant, tc.actor, tc.owner, tc.name, got, err)
		case tc.want != "" && (err != nil || got.ID != tc.want || got.InstanceID == ""):
			t.Errorf("ActiveSession(%s, %s, %s, %s) = %+v, %v; want %s", tc.tenant, tc.actor, tc.owner, tc.name, got, err, tc.want)
		}
	}
	if one, err := st.Session(ctx, "s3"); err != nil || one.ID != "s3" || one.InstanceID != "alive" || one.Status != store.StatusActive {
		t.Errorf("Session(s3) = %+v, %v", one, err)
	}
	if _, err := st.Session(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session(unknown) err = %v; want ErrNotFound", err)
	}

	// s4 ends by disconnect first; a later end keeps the first reason.
	mustNil(t, st.EndSession(ctx, "s4", "disconnect", t0.Add(time.Minute)))
	mustNil(t, st.EndSession(ctx, "s4", "lease_expired", t0.Add(time.Hour)))
	if err := st.EndSession(ctx, "nope", "x", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("end unknown session: %v", err)
	}

	// The dead instance's remaining sessions end once, whoever reaps it.
	ended, err := st.EndSessionsOf(ctx, "dead", "server_restart", t0.Add(2*time.Minute))
	mustNil(t, err)
	if ids(ended) != "s1 s2" || ended[0].Status != store.StatusEnded || ended[0].EndReason != "server_restart" ||
		!sameTime(ended[0].EndedAt, t0.Add(2*time.Minute)) || !sameTime(ended[0].CreatedAt, t0) ||
		!slices.Equal(ended[0].TokenHash, rows[0].TokenHash) || ended[1].Name != rows[1].Name {
		t.Fatalf("EndSessionsOf = %+v", ended)
	}
	again, err := st.EndSessionsOf(ctx, "dead", "server_restart", t0.Add(3*time.Minute))
	mustNil(t, err)
	if len(again) != 0 {
		t.Fatalf("second EndSessionsOf ended %s", ids(again))
	}
	if none, err := st.EndSessionsOf(ctx, "ghost", "server_restart", t0); err != nil || len(none) != 0 {
		t.Fatalf("EndSessionsOf(unknown) = %v, %v", none, err)
	}

	active, err = st.ActiveSessions(ctx)
	mustNil(t, err)
	if ids(active) != "s3 s7" {
		t.Fatalf("active after reaping = %s; want s3 s7 (the live instance's)", ids(active))
	}
	if of, err := st.ActiveSessionsOf(ctx, "default", "alice", "conn-dead"); err != nil || len(of) != 0 {
		t.Fatalf("ActiveSessionsOf after reaping = %s, %v; want none", ids(of), err)
	}
	for _, tc := range []struct{ tenant, name, want string }{
		{"default", "dev", "s1 s4"}, // s1 ended later than s4
		{"default", rows[1].Name, "s2"},
		{"other", "dev", ""},
		{"default", "none", ""},
	} {
		got, err := st.FindEnded(ctx, tc.tenant, tc.name)
		mustNil(t, err)
		if ids(got) != tc.want {
			t.Errorf("FindEnded(%s, %s) = %q; want %q", tc.tenant, tc.name, ids(got), tc.want)
		}
	}
	dev, err := st.FindEnded(ctx, "default", "dev")
	mustNil(t, err)
	if dev[0].EndReason != "server_restart" || dev[1].EndReason != "disconnect" || !sameTime(dev[1].EndedAt, t0.Add(time.Minute)) ||
		dev[1].Status != store.StatusEnded || !slices.Equal(dev[1].TokenHash, rows[3].TokenHash) {
		t.Fatalf("FindEnded(dev) = %+v; want s4's first end kept", dev)
	}
	if one, err := st.Session(ctx, "s4"); err != nil || one.Status != store.StatusEnded || one.EndReason != "disconnect" {
		t.Errorf("Session(s4) = %+v, %v; want ended by disconnect", one, err)
	}
	if _, err := st.ActiveSession(ctx, "default", "alice", "conn-other", "dev"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ActiveSession finds ended s4: %v", err)
	}
}

// endSessionsOfRace reaps one dead instance from several handles at once:
// every session is ended, and returned to exactly one reaper.
func (s *suite) endSessionsOfRace(t *testing.T) {
	ctx := context.Background()
	st, where := s.fresh(t)
	other := s.open(t, where)
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "dead", StartedAt: t0}))
	const n = 30
	for i := range n {
		mustNil(t, st.CreateSession(ctx, session(fmt.Sprintf("s%02d", i), fmt.Sprintf("dev%02d", i), "dead", t0.Add(time.Duration(i)*time.Second))))
	}
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		wg   sync.WaitGroup
		errs = make(chan error, 8)
	)
	for i := range 8 {
		h := []store.Store{st, other}[i%2]
		wg.Go(func() {
			rows, err := h.EndSessionsOf(ctx, "dead", "server_restart", t0.Add(time.Hour))
			errs <- err
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rows {
				got[r.ID]++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustNil(t, err)
	}
	if len(got) != n {
		t.Fatalf("%d sessions ended; want %d", len(got), n)
	}
	for id, k := range got {
		if k != 1 {
			t.Errorf("session %s returned to %d reapers", id, k)
		}
	}
	if active, err := st.ActiveSessions(ctx); err != nil || len(active) != 0 {
		t.Fatalf("active after the race: %s, %v", ids(active), err)
	}
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func (s *suite) commands(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i", StartedAt: t0}))
	mustNil(t, st.CreateSession(ctx, session("s", "dev", "i", t0)))
	zero, one := 0, 1
	cmds := []store.CommandRow{
		{ID: "c1", SessionID: "s", Source: store.SourceAgent, Command: "ls -la && echo 'ü'", Cwd: "/w", ExitCode: &zero,
			StartedAt: t0, DurationMs: 12, StdoutBytes: 100, StderrBytes: 7, StdoutPath: "/spool/c1.out", StderrPath: "/spool/c1.err",
			Connections: []store.Connection{
				{Host: "proxy.golang.org", Port: 443, Addr: "142.250.1.1", Decision: "allowed", BytesUp: 517, BytesDown: 90210, DurationMs: 340},
				{Host: "evil.example", Port: 443, Decision: "refused"},
			}},
		{ID: "c2", SessionID: "s", Source: store.SourceUser, Command: "false", Cwd: "/w", ExitCode: &one,
			StartedAt: t0.Add(time.Second), DurationMs: 1},
		{ID: "c3", SessionID: "s", Source: store.SourceAgent, Command: "sleep 1000", Cwd: "/w",
			StartedAt: t0.Add(2 * time.Second), DurationMs: 1 << 40}, // never finished: no exit code
		{ID: "c4", SessionID: "s", Source: store.SourceUser, Command: "echo same instant", Cwd: "/",
			StartedAt: t0.Add(2 * time.Second)}, // same start as c3, added after it
	}
	for _, c := range []store.CommandRow{cmds[2], cmds[0], cmds[3], cmds[1]} { // the order of starts counts, not of inserts
		mustNil(t, st.AddCommand(ctx, c))
	}
	for name, c := range map[string]store.CommandRow{
		"unknown session": {ID: "c9", SessionID: "nope", Source: store.SourceAgent, StartedAt: t0},
		"bad source":      {ID: "c9", SessionID: "s", Source: "robot", StartedAt: t0},
		"duplicate id":    cmds[0],
	} {
		if err := st.AddCommand(ctx, c); err == nil {
			t.Errorf("%s: AddCommand succeeded", name)
		}
	}
	got, err := st.Commands(ctx, "s")
	mustNil(t, err)
	if len(got) != len(cmds) {
		t.Fatalf("commands = %+v", got)
	}
	for i, want := range cmds {
		g := got[i]
		if !sameTime(g.StartedAt, want.StartedAt) || !sameInt(g.ExitCode, want.ExitCode) {
			t.Errorf("command %d = %+v; want %+v", i, g, want)
		}
		g.StartedAt, want.StartedAt, g.ExitCode, want.ExitCode = time.Time{}, time.Time{}, nil, nil
		if !reflect.DeepEqual(g, want) {
			t.Errorf("command %d =\n%+v\nwant\n%+v", i, g, want)
		}
	}
	if none, err := st.Commands(ctx, "other"); err != nil || len(none) != 0 {
		t.Fatalf("commands of unknown session = %v, %v", none, err)
	}
	if sid, err := st.CommandSession(ctx, "c3"); err != nil || sid != "s" {
		t.Errorf("CommandSession(c3) = %q, %v; want s", sid, err)
	}
	if _, err := st.CommandSession(ctx, "c99"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CommandSession(unknown) err = %v; want ErrNotFound", err)
	}
	// Retention removed c1's files: its row keeps its counts, names none.
	mustNil(t, st.OutputsRemoved(ctx, []string{"c1", "c99"}))
	mustNil(t, st.OutputsRemoved(ctx, nil))
	got, err = st.Commands(ctx, "s")
	mustNil(t, err)
	if g := got[0]; g.ID != "c1" || g.StdoutPath != "" || g.StderrPath != "" || g.StdoutBytes != 100 || g.StderrBytes != 7 {
		t.Errorf("after OutputsRemoved: %+v", g)
	}
}

func (s *suite) replays(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i", PID: 1, Host: "h", StartedAt: t0}))
	mustNil(t, st.CreateSession(ctx, session("s1", "dev", "i", t0)))
	mustNil(t, st.CreateSession(ctx, session("s2", "ops", "i", t0)))
	key := sha256.Sum256([]byte("monitor-key"))
	mustNil(t, st.AddReplay(ctx, "s1", key[:], "/data/recordings/s1.cast"))
	r, err := st.FindReplay(ctx, key[:])
	if err != nil || r != (store.Replay{SessionID: "s1", Name: "dev", Status: store.StatusActive, RecordingPath: "/data/recordings/s1.cast"}) {
		t.Fatalf("find replay: %+v %v", r, err)
	}
	mustNil(t, st.EndSession(ctx, "s1", "disconnected", t0.Add(time.Minute)))
	if r, err := st.FindReplay(ctx, key[:]); err != nil || r.Status != store.StatusEnded {
		t.Errorf("after end: %+v, %v", r, err)
	}
	other := sha256.Sum256([]byte("other"))
	if _, err := st.FindReplay(ctx, other[:]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	for name, err := range map[string]error{
		"short key hash":    st.AddReplay(ctx, "s2", []byte("short"), "x"),
		"unknown session":   st.AddReplay(ctx, "nope", other[:], "x"),
		"second for s1":     st.AddReplay(ctx, "s1", other[:], "x"),
		"key of another s2": st.AddReplay(ctx, "s2", key[:], "x"),
	} {
		if err == nil {
			t.Errorf("%s: AddReplay succeeded", name)
		}
	}
}

// recordedSessions: the ended sessions with a recording are listed, most
// recently ended first and bounded, whichever process ran them; a live
// session and one without a recording are not. ReplayOf finds a recording
// by its session's id.
func (s *suite) recordedSessions(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i1", PID: 1, Host: "h", StartedAt: t0}))
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i2", PID: 2, Host: "h", StartedAt: t0}))
	for i, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		inst := []string{"i1", "i2"}[i%2]
		mustNil(t, st.CreateSession(ctx, session(id, "n"+id, inst, t0.Add(time.Duration(i)*time.Second))))
		if id != "s4" {
			key := sha256.Sum256([]byte("key-" + id))
			mustNil(t, st.AddReplay(ctx, id, key[:], "/data/recordings/"+id+".cast"))
		}
	}
	if none, err := st.RecordedSessions(ctx, 10); err != nil || len(none) != 0 {
		t.Fatalf("recorded sessions while all are live: %+v %v", none, err)
	}
	// s2 stays live; s4 has no recording; s3 ended last, s1 before it, s5 first.
	mustNil(t, st.EndSession(ctx, "s5", "disconnected", t0.Add(time.Minute)))
	mustNil(t, st.EndSession(ctx, "s1", "idle_timeout", t0.Add(2*time.Minute)))
	mustNil(t, st.EndSession(ctx, "s4", "disconnected", t0.Add(3*time.Minute)))
	mustNil(t, st.EndSession(ctx, "s3", "human_exit", t0.Add(4*time.Minute)))
	got, err := st.RecordedSessions(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, r := range got {
		list = append(list, r.Session.ID+"="+r.RecordingPath)
	}
	if want := "s3=/data/recordings/s3.cast s1=/data/recordings/s1.cast s5=/data/recordings/s5.cast"; strings.Join(list, " ") != want {
		t.Errorf("recorded sessions = %q; want %q", strings.Join(list, " "), want)
	}
	if len(got) > 0 {
		r := got[0].Session
		if r.Name != "ns3" || r.InstanceID != "i1" || r.Status != store.StatusEnded || r.EndReason != "human_exit" ||
			!sameTime(r.EndedAt, t0.Add(4*time.Minute)) || r.Actor != "alice" || r.Tenant != "default" {
			t.Errorf("newest recorded session: %+v", r)
		}
	}
	if two, err := st.RecordedSessions(ctx, 2); err != nil || len(two) != 2 || two[0].Session.ID != "s3" || two[1].Session.ID != "s1" {
		t.Errorf("the newest 2: %+v %v", two, err)
	}
	for _, bad := range []int{0, -1, store.MaxRecordedSessions + 1} {
		if _, err := st.RecordedSessions(ctx, bad); err == nil {
			t.Errorf("limit %d accepted", bad)
		}
	}
	if r, err := st.ReplayOf(ctx, "s1"); err != nil || r != (store.Replay{SessionID: "s1", Name: "ns1", Status: store.StatusEnded, RecordingPath: "/data/recordings/s1.cast"}) {
		t.Errorf("ReplayOf(s1) = %+v, %v", r, err)
	}
	if r, err := st.ReplayOf(ctx, "s2"); err != nil || r.Status != store.StatusActive {
		t.Errorf("ReplayOf(live s2) = %+v, %v", r, err)
	}
	for _, id := range []string{"s4", "nope"} {
		if _, err := st.ReplayOf(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReplayOf(%s) err = %v; want ErrNotFound", id, err)
		}
	}
}

// genesis stands in for internal/audit's genesis hash: the suite builds
// its own chain, hashed its own way, since the store must not care how.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

func fakeHash(r store.AuditRecord) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d|%s|%s|%s|%s|%s", r.Seq, r.PrevHash, r.Time.UTC().Format(time.RFC3339Nano), r.Actor, r.Event, r.Args))
	return hex.EncodeToString(h[:])
}

// link returns the build function that chains r onto the head.
func link(r store.AuditRecord) func(store.AuditHead) (store.AuditRecord, error) {
	return func(h store.AuditHead) (store.AuditRecord, error) {
		r.Seq, r.PrevHash, r.HashVersion = h.Seq+1, h.Hash, 2
		if h.Seq == 0 {
			r.PrevHash = genesis
		}
		r.Hash = fakeHash(r)
		return r, nil
	}
}

// checkChain reads the whole log and checks it is one chain of want
// records: seq 1..want without gaps, each linked to the one before, each
// hash intact, no key twice.
func checkChain(t *testing.T, st store.Store, want int, key func(store.AuditRecord) string) {
	t.Helper()
	seen := map[string]bool{}
	var prev store.AuditRecord
	n := 0
	mustNil(t, st.ScanAudit(context.Background(), func(r store.AuditRecord) error {
		n++
		switch {
		case r.Seq != int64(n):
			return fmt.Errorf("seq %d where %d was expected", r.Seq, n)
		case n == 1 && r.PrevHash != genesis, n > 1 && r.PrevHash != prev.Hash:
			return fmt.Errorf("record %d links to %.12s, not to the record before (%.12s): a fork", r.Seq, r.PrevHash, prev.Hash)
		case fakeHash(r) != r.Hash:
			return fmt.Errorf("record %d does not hash to its hash: it changed in the store", r.Seq)
		case seen[key(r)]:
			return fmt.Errorf("record %q stored twice", key(r))
		}
		seen[key(r)] = true
		prev = r
		return nil
	}))
	if n != want {
		t.Fatalf("chain of %d records; want %d", n, want)
	}
}

func (s *suite) auditAppend(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)

	// A failing build stores nothing and its error comes back.
	boom := errors.New("boom")
	var heads []store.AuditHead
	if _, err := st.AppendAudit(ctx, func(h store.AuditHead) (store.AuditRecord, error) {
		heads = append(heads, h)
		return store.AuditRecord{}, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("build error: %v; want boom", err)
	}
	if len(heads) != 1 || heads[0] != (store.AuditHead{}) {
		t.Fatalf("heads of an empty log = %+v; want one zero head", heads)
	}
	// A record that does not follow the head is refused.
	for _, seq := range []int64{0, 2, -1} {
		if _, err := st.AppendAudit(ctx, func(h store.AuditHead) (store.AuditRecord, error) {
			return store.AuditRecord{Seq: seq, Time: t0, Event: "x", Hash: "h"}, nil
		}); err == nil {
			t.Fatalf("a record with seq %d was stored on an empty log", seq)
		}
	}
	checkChain(t, st, 0, nil)

	first, err := st.AppendAudit(ctx, link(store.AuditRecord{Time: t0, Event: "e", Actor: "a"}))
	mustNil(t, err)
	if first.Seq != 1 || first.PrevHash != genesis || first.Time.Location() != time.UTC || !first.Time.Equal(t0) {
		t.Fatalf("first record = %+v", first)
	}
	if _, err := st.AppendAudit(ctx, func(h store.AuditHead) (store.AuditRecord, error) {
		if h != (store.AuditHead{Seq: 1, Hash: first.Hash}) {
			t.Errorf("head = %+v; want seq 1 and the first record's hash", h)
		}
		return store.AuditRecord{}, boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	second, err := st.AppendAudit(ctx, link(store.AuditRecord{Time: t0, Event: "e", Actor: "b"}))
	mustNil(t, err)
	if second.Seq != 2 || second.PrevHash != first.Hash {
		t.Fatalf("second record = %+v; want seq 2 linked to the first", second)
	}
	checkChain(t, st, 2, func(r store.AuditRecord) string { return r.Actor })
}

// auditRoundTrip checks that every field comes back exactly as given:
// the hash covers them all, Args byte for byte and Time to the nanosecond.
func (s *suite) auditRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, where := s.fresh(t)
	exit, zero := 3, 0
	recs := []store.AuditRecord{{
		Time: t0, Tenant: "acme", Actor: "alice ☃", ClaimFingerprint: "fp", JTI: "jti-1", SessionID: "s1", SessionName: "dev",
		Target: "prod", Tool: "ssh_exec", Event: "tool_call",
		// Key order, spacing and escapes as given: jsonb would rewrite all three.
		Args:    []byte(`{"z": 1,"a":[2, 1],"s":"\u00e9\n",  "n":1.0}`),
		Outcome: "ok", Reason: "why", ExitCode: &exit, DurationMs: 1 << 40, Bytes: 12345, ApprovalID: "ap-1",
		SID: "run-1", Workspace: "ws=/srv/ws",
	}, {
		// Empty fields, a zero exit code, no args, one nanosecond.
		Time: time.Date(2026, 3, 1, 12, 0, 0, 1, time.UTC), Event: "session_end", ExitCode: &zero,
	}, {
		Time: time.Date(1, 1, 1, 0, 0, 0, 999, time.UTC), Event: "far", Args: []byte(`[]`),
	}, {
		Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", 7*3600)), Event: "far", Args: []byte(`"x"`),
	}}
	var appended []store.AuditRecord
	for _, r := range recs {
		got, err := st.AppendAudit(ctx, link(r))
		mustNil(t, err)
		appended = append(appended, got)
	}
	same := func(what string, got, want []store.AuditRecord) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d records; want %d", what, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Time.Location() != time.UTC || !g.Time.Equal(w.Time) {
				t.Errorf("%s: record %d time = %v; want %v exactly, in UTC", what, i+1, g.Time, w.Time)
			}
			g.Time, w.Time = time.Time{}, time.Time{}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s: record %d =\n%+v\nwant\n%+v", what, i+1, g, w)
			}
		}
	}
	// What AppendAudit returns is what build made, Time in UTC.
	want := make([]store.AuditRecord, len(recs))
	var head store.AuditHead
	for i, r := range recs {
		want[i], _ = link(r)(head)
		head = store.AuditHead{Seq: want[i].Seq, Hash: want[i].Hash}
	}
	same("AppendAudit", appended, want)

	var scanned []store.AuditRecord
	mustNil(t, s.open(t, where).ScanAudit(ctx, func(r store.AuditRecord) error { scanned = append(scanned, r); return nil }))
	same("ScanAudit", scanned, appended)
	tail, err := st.TailAudit(ctx, 10, store.AuditFilter{})
	mustNil(t, err)
	same("TailAudit", tail, appended)
	checkChain(t, st, len(recs), func(r store.AuditRecord) string { return fmt.Sprint(r.Seq) })
}

func seqs(rs []store.AuditRecord) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

func (s *suite) auditTail(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	for i, name := range []string{"dev", "ops", "dev", "", "dev", "ops"} {
		_, err := st.AppendAudit(ctx, link(store.AuditRecord{
			Time: t0.Add(time.Duration(i) * time.Second), SessionName: name, Tenant: []string{"a", "b"}[i%2], Event: "tool_call",
		}))
		mustNil(t, err)
	}
	for _, tc := range []struct {
		n               int
		session, tenant string
		want            []int64
		before          int64
	}{
		{2, "", "", []int64{3, 4}, 5},
		{10, "dev", "", []int64{1, 3}, 5},
		{10, "", "b", []int64{2}, 4},
		{10, "", "", nil, 1},
		{2, "", "", []int64{5, 6}, 0},
		{10, "", "", []int64{1, 2, 3, 4, 5, 6}, 0},
		{10, "dev", "", []int64{1, 3, 5}, 0},
		{2, "dev", "", []int64{3, 5}, 0},
		{10, "nope", "", nil, 0},
		{0, "", "", nil, 0},
		{-1, "", "", nil, 0},
		{10, "", "b", []int64{2, 4, 6}, 0},
		{10, "ops", "b", []int64{2, 6}, 0},
		{1, "ops", "b", []int64{6}, 0},
		{10, "dev", "b", nil, 0},
	} {
		got, err := st.TailAudit(ctx, tc.n, store.AuditFilter{SessionName: tc.session, Tenant: tc.tenant, Before: tc.before})
		mustNil(t, err)
		if !slices.Equal(seqs(got), tc.want) {
			t.Errorf("TailAudit(%d, %q, %q, before %d) = %v; want %v", tc.n, tc.session, tc.tenant, tc.before, seqs(got), tc.want)
		}
	}
}

func (s *suite) auditScan(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	const n = 2500 // more than one page, where a backend reads in pages
	for i := range n {
		_, err := st.AppendAudit(ctx, link(store.AuditRecord{Time: t0, Event: "e", Args: fmt.Appendf(nil, "%d", i)}))
		mustNil(t, err)
	}

	// fn's error stops the scan and comes back as it is.
	stop := errors.New("stop")
	calls := 0
	err := st.ScanAudit(ctx, func(r store.AuditRecord) error {
		calls++
		if r.Seq == 1500 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 1500 {
		t.Fatalf("scan stopped by fn: %v after %d calls; want the very error after 1500", err, calls)
	}

	// The scan reads one snapshot: records appended while it runs, even
	// through the same handle, are not in it.
	seen := 0
	mustNil(t, st.ScanAudit(ctx, func(r store.AuditRecord) error {
		seen++
		if r.Seq == 1 || r.Seq == 1200 {
			_, err := st.AppendAudit(ctx, link(store.AuditRecord{Time: t0, Event: "during scan"}))
			return err
		}
		return nil
	}))
	if seen != n {
		t.Fatalf("scan saw %d records; want the %d there were when it began", seen, n)
	}
	checkChain(t, st, n+2, func(r store.AuditRecord) string { return fmt.Sprint(r.Seq) })
}

// auditConcurrent appends from many goroutines through two handles, each
// with its own connections, so they contend as two processes do: every
// append succeeds, and the log is one chain with no gap and no fork.
func (s *suite) auditConcurrent(t *testing.T) {
	ctx := context.Background()
	st, where := s.fresh(t)
	handles := []store.Store{st, s.open(t, where)}
	const goroutines, each = 6, 25
	errs := make(chan error, len(handles)*goroutines)
	for h, hs := range handles {
		for g := range goroutines {
			go func() {
				for i := range each {
					if _, err := hs.AppendAudit(ctx, link(store.AuditRecord{
						Time: time.Now(), Event: "tool_call", Actor: fmt.Sprintf("h%d-g%d", h, g), Args: fmt.Appendf(nil, `{"i":%d}`, i),
					})); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for range len(handles) * goroutines {
		mustNil(t, <-errs)
	}
	checkChain(t, s.open(t, where), len(handles)*goroutines*each, func(r store.AuditRecord) string { return r.Actor + string(r.Args) })
}

func (s *suite) writable(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	mustNil(t, st.Writable(ctx))
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := st.Writable(done); err == nil {
		t.Error("Writable with a cancelled ctx succeeded")
	}
	_, err := st.AppendAudit(ctx, link(store.AuditRecord{Time: t0, Event: "after"}))
	mustNil(t, err)
}

func (s *suite) revocations(t *testing.T) {
	ctx := context.Background()
	a, where := s.fresh(t)
	b := s.open(t, where)
	now := time.Now()
	mustNil(t, a.Revoke(ctx, "live", now.Add(time.Hour)))
	mustNil(t, a.Revoke(ctx, "live", now.Add(-time.Hour))) // twice: the first entry stays
	mustNil(t, b.Revoke(ctx, "also", now.Add(time.Minute)))
	mustNil(t, a.Revoke(ctx, "gone", now.Add(-time.Minute)))
	got, err := b.RevokedJTIs(ctx)
	mustNil(t, err)
	slices.Sort(got)
	if !slices.Equal(got, []string{"also", "live"}) {
		t.Fatalf("revoked = %v; want [also live] (an expired token needs no entry)", got)
	}
	if err := a.Revoke(ctx, "", now.Add(time.Hour)); err == nil {
		t.Fatal("empty jti accepted")
	}
}

func (s *suite) approvals(t *testing.T) {
	ctx := context.Background()
	st, _ := s.fresh(t)
	rows := []store.ApprovalRow{
		{ID: "a1", InstanceID: "gone", Tenant: "t", Actor: "alice", SessionID: "s1", SessionName: "dev", Target: "prod",
			Tool: "ssh_exec", Command: "rm -rf x", Cwd: "/w", Fingerprint: "fp1", Rule: "ask rm", CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)},
		{ID: "a2", InstanceID: "gone", Tenant: "t", Command: "ls", CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)},
		{ID: "a3", InstanceID: "alive", Tenant: "t", Command: "ls", CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)},
		{ID: "a4", InstanceID: "gone", Tenant: "t", Command: "ls", CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)},
	}
	for _, r := range rows {
		mustNil(t, st.AddApproval(ctx, r))
	}
	if err := st.AddApproval(ctx, rows[0]); err == nil {
		t.Error("a duplicate approval id was accepted")
	}
	pending, err := st.PendingApprovals(ctx)
	mustNil(t, err)
	if len(pending) != 4 || pending[0].ID != "a1" || pending[0].Status != "pending" || pending[0].Command != "rm -rf x" ||
		pending[0].InstanceID != "gone" || pending[0].Actor != "alice" || !sameTime(pending[0].ExpiresAt, t0.Add(time.Minute)) {
		t.Fatalf("pending = %+v; want a1..a4, a1 whole", pending)
	}
	mustNil(t, st.DecideApproval(ctx, "a2", "approved", "dashboard", "", t0))
	mustNil(t, st.DecideApproval(ctx, "a4", "expired", "timeout", "", t0))
	mustNil(t, st.DecideApproval(ctx, "a4", "approved", "late", "", t0)) // keeps expired
	mustNil(t, st.DecideApproval(ctx, "nope", "approved", "x", "", t0))  // nothing to decide
	at := t0.Add(time.Hour)
	if pending, err := st.PendingApprovals(ctx); err != nil || len(pending) != 2 || pending[0].ID != "a1" || pending[1].ID != "a3" {
		t.Fatalf("pending after decisions = %+v, %v; want a1 a3", pending, err)
	}
	got, err := st.DenyApprovalsOf(ctx, "gone", "restart", "server_restart", at)
	mustNil(t, err)
	if len(got) != 1 {
		t.Fatalf("denied %+v; want only the pending a1", got)
	}
	want := rows[0]
	want.Status, want.DecidedBy, want.DecisionReason = "denied", "restart", "server_restart"
	g := got[0]
	if g.DecidedAt == nil || !g.DecidedAt.Equal(at) {
		t.Errorf("decided at %v; want %v", g.DecidedAt, at)
	}
	// The times of a denied row are not read back (only what tells the
	// denial apart), so they are left out of the comparison.
	g.DecidedAt, g.CreatedAt, g.ExpiresAt, want.CreatedAt, want.ExpiresAt = nil, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("denied =\n%+v\nwant\n%+v", g, want)
	}
	if again, err := st.DenyApprovalsOf(ctx, "gone", "restart", "server_restart", at); err != nil || len(again) != 0 {
		t.Errorf("denied twice: %+v, %v", again, err)
	}
	// a3 belongs to a live process: still pending, so its own process can decide it.
	if alive, err := st.DenyApprovalsOf(ctx, "alive", "restart", "server_restart", at); err != nil || len(alive) != 1 || alive[0].ID != "a3" {
		t.Errorf("deny of alive = %+v, %v; want a3, still pending until then", alive, err)
	}
}

// denyApprovalsOfRace denies a gone process's approvals from several
// handles at once: each is denied once, returned to one caller.
func (s *suite) denyApprovalsOfRace(t *testing.T) {
	ctx := context.Background()
	st, where := s.fresh(t)
	other := s.open(t, where)
	const n = 30
	for i := range n {
		mustNil(t, st.AddApproval(ctx, store.ApprovalRow{ID: fmt.Sprintf("a%02d", i), InstanceID: "gone", CreatedAt: t0, ExpiresAt: t0}))
	}
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		wg   sync.WaitGroup
		errs = make(chan error, 8)
	)
	for i := range 8 {
		h := []store.Store{st, other}[i%2]
		wg.Go(func() {
			rows, err := h.DenyApprovalsOf(ctx, "gone", "restart", "server_restart", t0)
			errs <- err
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rows {
				got[r.ID]++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustNil(t, err)
	}
	if len(got) != n {
		t.Fatalf("%d approvals denied; want %d", len(got), n)
	}
	for id, k := range got {
		if k != 1 {
			t.Errorf("approval %s returned to %d callers", id, k)
		}
	}
}

// close checks that a closed handle fails every call with an error (no
// panic, no hang) and leaves other handles on the database working.
func (s *suite) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, where := s.fresh(t)
	closed, err := s.b.Open(ctx, where)
	mustNil(t, err)
	mustNil(t, closed.RegisterInstance(ctx, store.Instance{ID: "i", StartedAt: t0}))
	mustNil(t, closed.Close())
	key := sha256.Sum256([]byte("k"))
	for name, call := range map[string]func() error{
		"RegisterInstance": func() error { return closed.RegisterInstance(ctx, store.Instance{ID: "j", StartedAt: t0}) },
		"Heartbeat":        func() error { return closed.Heartbeat(ctx, "i", t0) },
		"Instance":         func() error { _, err := closed.Instance(ctx, "i"); return err },
		"DeadInstances":    func() error { _, err := closed.DeadInstances(ctx, t0); return err },
		"EndInstance":      func() error { return closed.EndInstance(ctx, "i", t0) },
		"CreateSession":    func() error { return closed.CreateSession(ctx, session("s", "dev", "i", t0)) },
		"EndSession":       func() error { return closed.EndSession(ctx, "s", "x", t0) },
		"EndSessionsOf":    func() error { _, err := closed.EndSessionsOf(ctx, "i", "x", t0); return err },
		"FindEnded":        func() error { _, err := closed.FindEnded(ctx, "t", "n"); return err },
		"ActiveSessions":   func() error { _, err := closed.ActiveSessions(ctx); return err },
		"AddCommand": func() error {
			return closed.AddCommand(ctx, store.CommandRow{ID: "c", SessionID: "s", Source: "agent"})
		},
		"Commands":       func() error { _, err := closed.Commands(ctx, "s"); return err },
		"OutputsRemoved": func() error { return closed.OutputsRemoved(ctx, []string{"c"}) },
		"AddReplay":      func() error { return closed.AddReplay(ctx, "s", key[:], "p") },
		"FindReplay":     func() error { _, err := closed.FindReplay(ctx, key[:]); return err },
		"AppendAudit": func() error {
			_, err := closed.AppendAudit(ctx, link(store.AuditRecord{Time: t0, Event: "e"}))
			return err
		},
		"ScanAudit":       func() error { return closed.ScanAudit(ctx, func(store.AuditRecord) error { return nil }) },
		"TailAudit":       func() error { _, err := closed.TailAudit(ctx, 1, store.AuditFilter{}); return err },
		"Writable":        func() error { return closed.Writable(ctx) },
		"Revoke":          func() error { return closed.Revoke(ctx, "j", t0) },
		"RevokedJTIs":     func() error { _, err := closed.RevokedJTIs(ctx); return err },
		"AddApproval":     func() error { return closed.AddApproval(ctx, store.ApprovalRow{ID: "a"}) },
		"DecideApproval":  func() error { return closed.DecideApproval(ctx, "a", "approved", "x", "", t0) },
		"DenyApprovalsOf": func() error { _, err := closed.DenyApprovalsOf(ctx, "i", "x", "", t0); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s after Close succeeded", name)
		}
	}
	_ = closed.Close() // a second Close may fail, but must not panic
	if in, err := st.Instance(ctx, "i"); err != nil || in.ID != "i" {
		t.Fatalf("the other handle after one closed: %+v, %v", in, err)
	}
}
