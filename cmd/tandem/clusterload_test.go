package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/server"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// roundRobin is the test's own load balancer: each request goes to the
// next node in turn, with no stickiness. Like an ordinary balancer it
// passes a request on to the next node when one refuses the connection,
// and answers 502 when a node drops a request it had taken.
type roundRobin struct {
	nodes  []string
	down   []atomic.Bool // a node that failed a request: skipped from then on, as a health check would
	next   atomic.Uint64
	client *http.Client
}

func startRoundRobin(t testing.TB, nodes []*httpServer) string {
	t.Helper()
	p := &roundRobin{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	for _, n := range nodes {
		p.nodes = append(p.nodes, n.base)
	}
	p.down = make([]atomic.Bool, len(nodes))
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (p *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	first := p.next.Add(1)
	for i := range uint64(len(p.nodes)) {
		k := (first + i) % uint64(len(p.nodes))
		if p.down[k].Load() {
			continue
		}
		base := p.nodes[k]
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := p.client.Do(req)
		var oe *net.OpError
		if err != nil {
			p.down[k].Store(true)
		}
		if errors.As(err, &oe) && oe.Op == "dial" {
			continue // it never reached the node: the next one takes it
		}
		if err != nil { // the node may have acted on it: not sent twice
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, rerr := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if rerr != nil {
				break
			}
		}
		resp.Body.Close()
		return
	}
	http.Error(w, "no node answers", http.StatusBadGateway)
}

// agent is one simulated agent of the load test and what it saw.
type agent struct {
	name, token, sessTok string
	cs                   *sdk.ClientSession
	acked                int      // exec calls answered ok, output checked
	lost                 int      // calls whose answer was lost in transit
	codes                []string // error codes seen
	ended                string   // the end reason once session_ended came
	bad                  []string // wrong answers
}

// call runs one tool call with a deadline: no call may hang.
func (a *agent) call(tool string, args map[string]any) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil || out["success"] == nil || res.IsError == (out["success"] == true) {
		return nil, fmt.Errorf("reply breaks the contract: %s", b)
	}
	return out, nil
}

// TestClusterLoad: three nodes share a real PostgreSQL behind a
// round-robin balancer. 50 agents run 100 commands each over HTTP; every
// output is exact and the agent's own. One node is killed with SIGKILL
// halfway: its sessions end with node_lost within the lease, the others
// go on untouched. Every acknowledged call is in the audit chain, once,
// and the chain verifies. The session directory matches the live shells.
// Then PostgreSQL stops for five seconds: calls fail with
// store_unavailable without hanging, and service resumes by itself.
func TestClusterLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster load test runs 5000 calls; -short skips it")
	}
	pg := testenv.OwnPostgres(t)
	ws := t.TempDir()
	nodes, _ := startNodes(t, 3, pg.URL(), "targets: [{name: local, kind: local, workspace: "+ws+"}]\n")
	lb := startRoundRobin(t, nodes) + "/mcp"
	const nAgents, perAgent = 50, 100
	agents := make([]*agent, nAgents)
	for i := range agents {
		a := &agent{name: fmt.Sprintf("a%02d", i), token: nodes[i%3].token(t, "--tenant", "default", "--actor", fmt.Sprintf("agent-%02d", i))}
		a.cs = clientAt(t, lb, a.token).CS
		r := mustOK(t, (&mcptest.Client{CS: a.cs}).Call(t, "ssh_connect", map[string]any{"name": a.name}))
		a.sessTok = str(r["sessionToken"])
		agents[i] = a
	}
	// Where each session lives, as the directory says.
	conn, err := pgx.Connect(context.Background(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	owner := map[string]int{}
	rows, err := conn.Query(context.Background(), `SELECT s.name, i.url FROM sessions s JOIN instances i ON i.id = s.instance_id WHERE s.status = 'active'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, url string
		if err := rows.Scan(&name, &url); err != nil {
			t.Fatal(err)
		}
		for i, n := range nodes {
			if n.base == url {
				owner[name] = i
			}
		}
	}
	rows.Close()
	perNode := [3]int{}
	for _, a := range agents {
		i, ok := owner[a.name]
		if !ok {
			t.Fatalf("session %s is not in the directory", a.name)
		}
		perNode[i]++
	}
	if perNode[0] == 0 || perNode[1] == 0 || perNode[2] == 0 {
		t.Fatalf("sessions per node %v: the balancer should spread them", perNode)
	}

	const victim = 2
	var done atomic.Int64
	var killed atomic.Bool
	var killedAt time.Time // written before killed is set
	kill := make(chan struct{})
	go func() {
		for done.Load() < nAgents*perAgent/2 {
			time.Sleep(time.Millisecond)
		}
		killedAt = time.Now()
		killed.Store(true)
		_ = nodes[victim].cmd.Process.Signal(syscall.SIGKILL)
		close(kill)
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			onVictim := owner[a.name] == victim
			lostCmd, busyWaits := "", 0 // the command of a call lost in transit
			for j := 0; j < perAgent; j++ {
				want := fmt.Sprintf("%s-%03d", a.name, j)
				r, err := a.call("ssh_exec", map[string]any{"sessionName": a.name, "sessionToken": a.sessTok, "command": "echo " + want})
				done.Add(1)
				switch {
				case err != nil && killed.Load() && (onVictim || time.Since(killedAt) < 3*time.Second):
					a.lost++ // in flight through, or at, the node that died
					lostCmd = "echo " + want
					continue
				case err != nil:
					a.bad = append(a.bad, fmt.Sprintf("call %d: %v", j, err))
					return
				case r["success"] == true:
					res, _ := r["result"].(map[string]any)
					if res["stdout"] != want+"\n" || res["exitCode"] != float64(0) {
						a.bad = append(a.bad, fmt.Sprintf("call %d: got %v, want %q", j, res, want))
					}
					a.acked++
					continue
				}
				code := str(r["error"])
				a.codes = append(a.codes, code)
				switch {
				case onVictim && killed.Load() && code == "node_unavailable" && r["mayHaveRun"] == true:
					a.lost++ // it reached the node that died: it may have run there
				case onVictim && killed.Load() && code == "node_unavailable":
					time.Sleep(100 * time.Millisecond) // the agent backs off until the session is declared lost
					j--
				case onVictim && killed.Load() && code == "session_ended":
					a.ended = str(r["reason"])
					return
				case code == "session_busy" && lostCmd != "" && r["runningCommand"] == lostCmd && busyWaits < 100:
					// The call lost with the dying node reached the session's
					// node, which ends that command now that its caller is
					// gone; the reply names it. Wait, as an agent would.
					busyWaits++
					time.Sleep(50 * time.Millisecond)
					j--
				default:
					a.bad = append(a.bad, fmt.Sprintf("call %d: %v", j, r))
					return
				}
			}
		}()
	}
	wg.Wait()
	<-kill
	t.Logf("%d agents × %d commands over 3 nodes in %v; node %d killed at %v", nAgents, perAgent, time.Since(start).Round(time.Millisecond), victim, killedAt.Sub(start).Round(time.Millisecond))
	for _, a := range agents {
		if len(a.bad) > 0 {
			t.Errorf("agent %s (node %d): %s", a.name, owner[a.name], strings.Join(a.bad, "; "))
		}
		switch {
		case owner[a.name] == victim && a.ended != "node_lost":
			t.Errorf("agent %s on the killed node: ended %q (codes %v); want session_ended with node_lost", a.name, a.ended, a.codes)
		case owner[a.name] != victim && (a.acked+a.lost != perAgent || a.lost > 1):
			t.Errorf("agent %s on a live node: %d acknowledged, %d lost in transit, codes %v; want all %d, at most one lost with the dying node", a.name, a.acked, a.lost, a.codes, perAgent)
		}
	}

	// The lost node's sessions ended within its lease (and a heartbeat).
	var lostAt time.Time
	if err := conn.QueryRow(context.Background(), `SELECT max(ended_at) FROM sessions WHERE end_reason = 'node_lost'`).Scan(&lostAt); err != nil {
		t.Fatalf("no session ended with node_lost: %v", err)
	}
	// The lease runs from the dead node's last heartbeat (up to one beat
	// before the kill); the reap comes at a survivor's next beat.
	if d := lostAt.Sub(killedAt); d > server.SharedLease+server.HeartbeatEvery+time.Second {
		t.Errorf("node_lost came %v after the kill; the lease is %v, checked every %v", d, server.SharedLease, server.HeartbeatEvery)
	} else {
		t.Logf("node_lost %v after the kill (lease %v)", d.Round(100*time.Millisecond), server.SharedLease)
	}

	// The directory matches the live shells: each live node's gauge.
	for i, n := range nodes {
		if i == victim {
			continue
		}
		var inDir int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM sessions s JOIN instances i ON i.id = s.instance_id
			WHERE s.status = 'active' AND i.url = $1`, n.base).Scan(&inDir); err != nil {
			t.Fatal(err)
		}
		live := value(scrape(t, n.base), "tandem_sessions", map[string]string{"state": "active"})
		if float64(inDir) != live || inDir != perNode[i] {
			t.Errorf("node %d: directory says %d active sessions, the node holds %v; it was given %d", i, inDir, live, perNode[i])
		}
	}

	// PostgreSQL stops for five seconds: calls fail fast and clearly, and
	// service resumes without a restart.
	survivors := []*agent{}
	for _, a := range agents {
		if owner[a.name] != victim {
			survivors = append(survivors, a)
		}
	}
	pg.Stop(t)
	stopped := time.Now()
	var codes sync.Map
	var owg sync.WaitGroup
	for _, a := range survivors[:10] {
		owg.Add(1)
		go func() {
			defer owg.Done()
			for time.Since(stopped) < 5*time.Second {
				callStart := time.Now()
				r, err := a.call("ssh_exec", map[string]any{"sessionName": a.name, "sessionToken": a.sessTok, "command": "echo outage"})
				if took := time.Since(callStart); took > 15*time.Second {
					t.Errorf("agent %s: a call during the outage took %v", a.name, took)
				}
				switch {
				case err != nil:
					t.Errorf("agent %s during the outage: %v", a.name, err)
					return
				case r["success"] == true:
					codes.Store("ok", true)
				default:
					codes.Store(str(r["error"]), str(r["message"]))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	owg.Wait()
	pg.Start(t)
	var seen []string
	codes.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	if msg, ok := codes.Load("store_unavailable"); !ok || len(seen) != 1 {
		t.Errorf("replies during the outage: %v; want only store_unavailable", seen)
	} else if !strings.Contains(msg.(string), "PostgreSQL") {
		t.Errorf("store_unavailable message: %s", msg)
	}
	resumed := waitFor(30*time.Second, func() bool {
		for _, a := range survivors {
			r, err := a.call("ssh_exec", map[string]any{"sessionName": a.name, "sessionToken": a.sessTok, "command": "echo back"})
			if err != nil || r["success"] != true {
				return false
			}
		}
		return true
	})
	if !resumed {
		t.Fatal("service did not resume within 30 s of PostgreSQL's return")
	}
	t.Logf("service resumed %v after PostgreSQL came back", time.Since(stopped)-5*time.Second)

	// Every acknowledged call is in the one chain, once; the chain verifies.
	_ = conn.Close(context.Background()) // cut by the outage
	if conn, err = pgx.Connect(context.Background(), pg.URL()); err != nil {
		t.Fatal(err)
	}
	audited := map[string]int{}
	rows, err = conn.Query(context.Background(), `SELECT session_name, count(*) FROM audit
		WHERE tool = 'ssh_exec' AND outcome = 'ok' AND convert_from(args, 'UTF8') NOT LIKE '%echo outage%'
		AND convert_from(args, 'UTF8') NOT LIKE '%echo back%' GROUP BY session_name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		audited[name] = n
	}
	rows.Close()
	for _, a := range agents {
		if got := audited[a.name]; got < a.acked || got > a.acked+a.lost {
			t.Errorf("agent %s: %d exec calls audited ok, %d acknowledged (+%d lost in transit)", a.name, got, a.acked, a.lost)
		}
	}
	if out, err := tandemCLI(t, "audit", "verify", "--store", pg.URL()); err != nil || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}
