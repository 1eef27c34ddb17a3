package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// benchDir is bench/, the TypeScript-SDK client's npm package, from this
// package's directory (where go test runs).
const benchDir = "../../bench"

// tsClient is one `node bench/client.mjs` process: a client built on the
// MCP TypeScript SDK, with a tandem of its own spawned over stdio. The
// benchmark drives it with one JSON line per request and reply (see the
// script's header), so its calls interleave with the floor's.
type tsClient struct {
	enc    *json.Encoder
	dec    *json.Decoder
	stderr string // node's stderr log, with tandem's in it
}

// tsReply is what the benchmark reads of client.mjs's reply lines; each
// op fills its own fields.
type tsReply struct {
	OK       bool    `json:"ok"`
	Error    string  `json:"error"`
	Token    string  `json:"token"` // a "connect" op's session token
	MS       float64 `json:"ms"`
	FullMS   float64 `json:"fullMs"`
	Bytes    int     `json:"bytes"`
	SHA256   string  `json:"sha256"`
	Via      string  `json:"via"`
	ExitCode *int    `json:"exitCode"`
	// Reply is a "call" op's tool reply object.
	Reply map[string]any `json:"reply"`
	// Messages are the "elicited" op's: the elicitations answered.
	Messages []string `json:"messages"`
}

// tsNodeModules installs bench/'s locked dependencies when they are not
// there yet (`make bench` installs them first), so the benchmark also runs
// alone. Without node or npm it skips, or fails under CI=true.
func tsNodeModules(b testing.TB) (node string) {
	b.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(b, "node not found: install Node.js 20 or later for the TypeScript-SDK client")
	}
	if _, err := os.Stat(filepath.Join(benchDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.Missing(b, "npm not found: it installs bench/'s dependencies (or run `cd bench && npm ci`)")
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = benchDir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("npm ci in bench/: %v\n%s", err, out)
	}
	return node
}

// startTSClient starts client.mjs, which spawns the built tandem with
// args, and waits for its ready line. b.Cleanup closes its stdin (it then
// closes tandem and exits), kills it if it has not exited 10 s later, and
// waits for it.
func startTSClient(b testing.TB, args ...string) *tsClient {
	return startTSClientEnv(b, nil, args...)
}

// startTSClientEnv is startTSClient with more environment, such as the
// bearer token of `--http URL`.
func startTSClientEnv(b testing.TB, env []string, args ...string) *tsClient {
	b.Helper()
	return startTSClientCmd(b, env, binary, args...)
}

// startTSClientCmd is startTSClientEnv with another program than tandem
// for the client to spawn over stdio.
func startTSClientCmd(b testing.TB, env []string, program string, args ...string) *tsClient {
	b.Helper()
	node := tsNodeModules(b)
	script, err := filepath.Abs(filepath.Join(benchDir, "client.mjs"))
	if err != nil {
		b.Fatal(err)
	}
	home := b.TempDir()
	argv := append([]string{script, program}, args...)
	if len(args) > 0 && args[0] == "--http" { // a running tandem, not one of its own
		argv = append([]string{script}, args...)
	}
	cmd := exec.Command(node, argv...)
	cmd.Dir = b.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "USER=" + os.Getenv("USER")}, env...)
	errf, err := os.CreateTemp(home, "node-stderr-*.log")
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = errf
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start node: %v", err)
	}
	c := &tsClient{enc: json.NewEncoder(in), dec: json.NewDecoder(out), stderr: errf.Name()}
	b.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = errf.Close()
		if b.Failed() {
			b.Logf("node (and tandem) stderr:\n%s", lastN(c.log(), 4000))
		}
	})
	var ready tsReply
	if err := c.dec.Decode(&ready); err != nil || !ready.OK {
		b.Fatalf("client.mjs did not start: %v %s", err, ready.Error)
	}
	return c
}

// log returns what node and tandem wrote to stderr so far.
func (c *tsClient) log() string {
	data, _ := os.ReadFile(c.stderr)
	return string(data)
}

// do sends one request and decodes its reply, failing on ok:false.
func (c *tsClient) do(req map[string]any) (tsReply, error) {
	var r tsReply
	if err := c.enc.Encode(req); err != nil {
		return r, fmt.Errorf("send %v to client.mjs: %w", req["op"], err)
	}
	if err := c.dec.Decode(&r); err != nil {
		return r, fmt.Errorf("read client.mjs's reply to %v: %w", req["op"], err)
	}
	if !r.OK {
		return r, fmt.Errorf("client.mjs %v: %s", req["op"], r.Error)
	}
	return r, nil
}

// mustDo is do for calls whose failure ends the benchmark.
func (c *tsClient) mustDo(b testing.TB, req map[string]any) tsReply {
	b.Helper()
	r, err := c.do(req)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// execReply is what a go-sdk client needs of an ssh_exec reply to get the
// whole stdout, under the inline contract and the bounded one (head
// inline, the rest through ssh_read_output or resources/read).
type execReply struct {
	Success   bool   `json:"success"`
	CommandID string `json:"commandId"`
	Result    struct {
		Stdout          string `json:"stdout"`
		StdoutEncoding  string `json:"stdoutEncoding"`
		StdoutTruncated bool   `json:"stdoutTruncated"`
		StdoutBytes     *int   `json:"stdoutBytes"`
		StdoutError     string `json:"stdoutError"`
		StdoutResource  *struct {
			URI   string `json:"uri"`
			Bytes int    `json:"bytes"`
			Pages int    `json:"pages"`
		} `json:"stdoutResource"`
		ExitCode int `json:"exitCode"`
	} `json:"result"`
}

// succeeded is a decoded tool reply that says whether tandem succeeded.
type succeeded interface{ ok() bool }

func (r *execReply) ok() bool { return r.Success }

// readOutputReply is what the go-sdk column needs of ssh_read_output.
type readOutputReply struct {
	Success  bool   `json:"success"`
	Bytes    int    `json:"bytes"`
	EOF      bool   `json:"eof"`
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
}

func (r *readOutputReply) ok() bool { return r.Success }

// goSDKCall calls a tool with the go-sdk and decodes the reply's text once
// into v, as leanExec does, failing unless tandem says success.
func goSDKCall(s sess, tool string, args map[string]any, v succeeded) error {
	res, err := s.srv.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("%s reply: %w", tool, err)
	}
	if res.IsError || !v.ok() {
		return fmt.Errorf("%s failed: %s", tool, lastN(text, 1000))
	}
	return nil
}

// decodeStream turns a delivered piece (text, or base64 when the bytes
// are not UTF-8) into bytes.
func decodeStream(data, encoding string) ([]byte, error) {
	if encoding == "base64" {
		return base64.StdEncoding.DecodeString(data)
	}
	return []byte(data), nil
}

// goSDKFullExec is the go-sdk column's full delivery, the same as
// client.mjs's: ssh_exec, then the whole stdout read back from offset 0
// when the reply only holds part of it. It returns the reply's time, the
// full delivery's time and the bytes.
func goSDKFullExec(s sess, cmd string, readOutput bool) (reply, full time.Duration, out []byte, err error) {
	t0 := time.Now()
	var r execReply
	if err := goSDKCall(s, "ssh_exec", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "command": cmd}, &r); err != nil {
		return 0, 0, nil, err
	}
	t1 := time.Now()
	res := r.Result
	switch {
	case res.StdoutResource == nil && res.StdoutTruncated:
		return 0, 0, nil, fmt.Errorf("%s: stdout truncated with no resource to read it from: %s", cmd, res.StdoutError)
	case res.StdoutResource == nil:
		out, err = decodeStream(res.Stdout, res.StdoutEncoding)
	case readOutput:
		for off := 0; ; {
			var p readOutputReply
			if err := goSDKCall(s, "ssh_read_output", map[string]any{"sessionName": s.name, "sessionToken": s.tok,
				"commandId": r.CommandID, "stream": "stdout", "offset": off, "maxBytes": 1 << 20}, &p); err != nil {
				return 0, 0, nil, err
			}
			piece, err := decodeStream(p.Data, p.Encoding)
			if err != nil {
				return 0, 0, nil, fmt.Errorf("ssh_read_output at %d: %w", off, err)
			}
			out = append(out, piece...)
			if p.EOF {
				break
			}
			if p.Bytes <= 0 {
				return 0, 0, nil, fmt.Errorf("ssh_read_output made no progress at offset %d", off)
			}
			off += p.Bytes
		}
	default:
		for page := 0; page < max(res.StdoutResource.Pages, 1); page++ {
			uri := res.StdoutResource.URI
			if page > 0 {
				uri += "?page=" + strconv.Itoa(page)
			}
			rr, err := s.srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
			if err != nil {
				return 0, 0, nil, fmt.Errorf("read %s: %w", uri, err)
			}
			if c := rr.Contents[0]; c.Blob != nil {
				out = append(out, c.Blob...)
			} else {
				out = append(out, c.Text...)
			}
		}
	}
	t2 := time.Now()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("%s stdout: %w", cmd, err)
	}
	if res.StdoutResource != nil && len(out) != res.StdoutResource.Bytes {
		return 0, 0, nil, fmt.Errorf("%s: read %d bytes, stdoutResource says %d", cmd, len(out), res.StdoutResource.Bytes)
	}
	if res.ExitCode != 0 {
		return 0, 0, nil, fmt.Errorf("%s: exit code %d", cmd, res.ExitCode)
	}
	return t1.Sub(t0), t2.Sub(t0), out, nil
}

// goCodec is "encode alone" in Go: encoding/json marshals the output as
// one JSON string and unmarshals it back.
func goCodec(out []byte) (time.Duration, error) {
	t0 := time.Now()
	wire, err := json.Marshal(string(out))
	if err != nil {
		return 0, fmt.Errorf("marshal: %w", err)
	}
	var back string
	if err := json.Unmarshal(wire, &back); err != nil {
		return 0, fmt.Errorf("unmarshal: %w", err)
	}
	d := time.Since(t0)
	if len(back) != len(out) {
		return 0, errors.New("encoding/json round trip changed the output")
	}
	return d, nil
}

// msDur is a time in milliseconds from client.mjs as a Duration.
func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// tsRow is one line of BenchmarkTSClient's table: the TypeScript-SDK
// client, the go-sdk client and the baseline, each call of one next to
// a call of the others.
type tsRow struct {
	name, metric string
	target       float64 // ratio of the TS client to the baseline, p50
	ts, gosdk    latencies
	base         latencies
	// goBase, if set, is the go-sdk's own baseline; else base is both's.
	goBase latencies
}

// BenchmarkTSClient is the TypeScript-SDK column of `make bench`: what an
// agent built on @modelcontextprotocol/sdk (bench/client.mjs, spawning
// tandem over stdio) pays per ssh_exec, beside the go-sdk client and the
// baseline, all from one run and interleaved call by call so all see the
// same noise. Over SSH the baseline is the floor of BenchmarkExecLatency
// (one persistent x/crypto/ssh connection, an exec channel per command,
// same sshd and light user); on the local sandbox it is node spawning
// `bash --noprofile --norc -c` itself. "Full delivery" is the reply plus
// reading the whole stdout back when the reply holds only part of it.
//
// "local echo hello HTTP" is the same local call to a `tandem serve
// --http` over Streamable HTTP, a bearer token on every request, each
// client on one kept-alive connection (Node's fetch and Go's
// http.Transport keep connections alive; the run checks how many it
// opened). Its baseline is each client's stdio call of the same loop, so
// its ratio is HTTP's median over stdio's: the target is 1.2x.
func BenchmarkTSClient(b *testing.B) {
	// Node first: without it there is nothing to measure (a skip, or a
	// failure under CI=true).
	// Both clients' servers run under a policy whose rules allow what the
	// loop runs: the price of a decision is in every figure.
	policyCfg := benchPolicy(b.TempDir())
	cfgFile := filepath.Join(b.TempDir(), "tandem.yaml")
	if err := os.WriteFile(cfgFile, []byte(policyCfg), 0o600); err != nil {
		b.Fatal(err)
	}
	ts := startTSClient(b, "serve", "--config", cfgFile, "--data-dir", b.TempDir(), "--web", "127.0.0.1:0", "--log-level", "info")
	d, login := benchSSHD(b)
	floorExec := dialFloor(b, d, login)
	sshArgs := map[string]any{"host": d.Host, "port": d.Port, "username": login, "keyFilePath": d.ClientKeyFile}
	connect := map[string]any{"op": "connect", "name": "ssh"}
	for k, v := range sshArgs {
		connect[k] = v
	}
	ts.mustDo(b, connect)
	ts.mustDo(b, map[string]any{"op": "connect", "name": "local"})
	hs := localHTTP(b)
	floorSrv := httptest.NewServer(http.HandlerFunc(answerPing))
	b.Cleanup(floorSrv.Close)
	tsHTTP := startTSClientEnv(b, []string{"TANDEM_TOKEN=" + hs.benchToken(b, "default", "bench-ts")}, "--http", hs.url)
	tsHTTP.mustDo(b, map[string]any{"op": "connect", "name": "local"})
	goHTTPClient := hs.client(b, hs.benchToken(b, "default", "bench-go"))
	goHTTP := sess{&tandemProc{cs: goHTTPClient.CS}, "local",
		str(mustOK(b, goHTTPClient.Call(b, "ssh_connect", map[string]any{"name": "local"}))["sessionToken"])}

	srv := startServer(b, serverOpts{logLevel: "info", config: benchPolicy(b.TempDir())})
	sshArgs["name"] = "ssh"
	goSSH := sess{srv, "ssh", str(mustOK(b, srv.call(b, "ssh_connect", sshArgs))["sessionToken"])}
	goLocal := sess{srv, "local", str(mustOK(b, srv.call(b, "ssh_connect", map[string]any{"name": "local"}))["sessionToken"])}
	tools, err := srv.cs.ListTools(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	goReadOutput := false
	for _, t := range tools.Tools {
		goReadOutput = goReadOutput || t.Name == "ssh_read_output"
	}

	const seq, seqBytes = "seq 1 100000", 588895
	const warm = 10 // calls before measuring, per case
	for i := 0; i < b.N; i++ {
		var rows []*tsRow
		var floorOut []byte
		var nodeCodec, goCodecs latencies

		// sshCall runs one call of each client and one of the floor, in
		// turn, checks all three got the same bytes and returns the times,
		// with the floor's output.
		type times struct {
			ts, tsFull, gosdk, goFull, base time.Duration
			out                             []byte
		}
		sshCall := func(cmd string, want int) times {
			tr := ts.mustDo(b, map[string]any{"op": "exec", "session": "ssh", "command": cmd, "full": true})
			gr, gf, gout, err := goSDKFullExec(goSSH, cmd, goReadOutput)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			fout, err := floorExec(cmd)
			base := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			sum := sha256.Sum256(fout)
			switch {
			case len(fout) != want:
				b.Fatalf("%s: the floor got %d bytes, want %d", cmd, len(fout), want)
			case tr.Bytes != want || tr.SHA256 != hex.EncodeToString(sum[:]) || tr.ExitCode == nil || *tr.ExitCode != 0:
				b.Fatalf("%s: the TypeScript-SDK client got %d bytes (want %d) via %s, sha256 %s (floor's %x), exit code %v",
					cmd, tr.Bytes, want, tr.Via, tr.SHA256, sum, tr.ExitCode)
			case string(gout) != string(fout):
				b.Fatalf("%s: the go-sdk client got %d bytes, the floor %d, and they differ", cmd, len(gout), len(fout))
			}
			return times{msDur(tr.MS), msDur(tr.FullMS), gr, gf, base, fout}
		}

		for _, c := range []struct {
			cmd  string
			want int
			n    int
		}{{"true", 0, 300}, {"echo hello", 6, 300}} {
			row := &tsRow{name: "ssh " + c.cmd, metric: strings.Fields(c.cmd)[0], target: 1.0}
			for j := 0; j < c.n+warm; j++ {
				t := sshCall(c.cmd, c.want)
				if j >= warm {
					row.ts, row.gosdk, row.base = append(row.ts, t.ts), append(row.gosdk, t.gosdk), append(row.base, t.base)
				}
			}
			rows = append(rows, row)
		}

		// seq is measured a client at a time, each call beside a floor call:
		// interleaving the two clients left one's garbage collection and its
		// server's background work (recording, journal) in the other's
		// figures. Full delivery is taken both ways an agent can read the
		// rest back: resources/read (what the target is for; the output
		// once, as text) and ssh_read_output (for clients that cannot read
		// resources; a tool result carries it twice, as text and as
		// structured content).
		reply := &tsRow{name: "ssh seq reply", metric: "seq-reply", target: 1.3}
		full := &tsRow{name: "ssh seq full", metric: "seq-full", target: 2.5}
		fullTool := &tsRow{name: "seq full read_output", metric: "seq-full-read-output"}
		// Each seq call starts on a quiet machine, as an agent's call does
		// after the model's turn: what one call leaves to do in the
		// background (tandem's recording and journal, sshd's teardown, a
		// client's garbage collection) must not land in the next
		// measurement, be it tandem's or the floor's.
		quiet := func() { time.Sleep(10 * time.Millisecond) }
		floorCall := func() time.Duration {
			quiet()
			t0 := time.Now()
			fout, err := floorExec(seq)
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if len(fout) != seqBytes {
				b.Fatalf("%s: the floor got %d bytes, want %d", seq, len(fout), seqBytes)
			}
			if floorOut == nil {
				floorOut = fout
			}
			return d
		}
		for j := 0; j < 60+warm; j++ {
			for _, via := range []string{"resources/read", "ssh_read_output"} {
				quiet()
				tr := ts.mustDo(b, map[string]any{"op": "exec", "session": "ssh", "command": seq, "full": true, "via": via})
				base := floorCall()
				sum := sha256.Sum256(floorOut)
				if tr.Bytes != seqBytes || tr.SHA256 != hex.EncodeToString(sum[:]) || tr.ExitCode == nil || *tr.ExitCode != 0 || tr.Via != via {
					b.Fatalf("%s: the TypeScript-SDK client got %d bytes (want %d) via %s (want %s), sha256 %s (floor's %x), exit code %v",
						seq, tr.Bytes, seqBytes, tr.Via, via, tr.SHA256, sum, tr.ExitCode)
				}
				if j < warm {
					continue
				}
				reply.ts, reply.base = append(reply.ts, msDur(tr.MS)), append(reply.base, base)
				row := full
				if via == "ssh_read_output" {
					row = fullTool
				}
				row.ts, row.base = append(row.ts, msDur(tr.FullMS)), append(row.base, base)
			}
			nc := ts.mustDo(b, map[string]any{"op": "codec"})
			if nc.Bytes != seqBytes {
				b.Fatalf("codec: client.mjs held %d bytes of output, want %d", nc.Bytes, seqBytes)
			}
			if j >= warm {
				nodeCodec = append(nodeCodec, msDur(nc.MS))
			}
		}
		for j := 0; j < 60+warm; j++ {
			for _, tool := range []bool{false, true} {
				quiet()
				gr, gf, gout, err := goSDKFullExec(goSSH, seq, tool && goReadOutput)
				if err != nil {
					b.Fatal(err)
				}
				base := floorCall()
				if string(gout) != string(floorOut) {
					b.Fatalf("%s: the go-sdk client got %d bytes, the floor %d, and they differ", seq, len(gout), len(floorOut))
				}
				if j < warm {
					continue
				}
				reply.gosdk, reply.goBase = append(reply.gosdk, gr), append(reply.goBase, base)
				row := full
				if tool {
					row = fullTool
				}
				row.gosdk, row.goBase = append(row.gosdk, gf), append(row.goBase, base)
			}
			gc, err := goCodec(floorOut)
			if err != nil {
				b.Fatal(err)
			}
			if j >= warm {
				goCodecs = append(goCodecs, gc)
			}
		}
		rows = append(rows, reply, full, fullTool)

		// Local calls, like seq, are measured a client at a time; within
		// a client, stdio and HTTP take turns going first, so neither
		// always runs in the other's wake. The local baseline is node
		// spawning bash, beside either client.
		tsLocal := func(c *tsClient) time.Duration {
			quiet()
			tr := c.mustDo(b, map[string]any{"op": "exec", "session": "local", "command": "echo hello", "full": true})
			if tr.Bytes != 6 || tr.ExitCode == nil || *tr.ExitCode != 0 {
				b.Fatalf("local echo hello: TypeScript-SDK client %d bytes (exit code %v)", tr.Bytes, tr.ExitCode)
			}
			return msDur(tr.MS)
		}
		goLocalCall := func(g sess) time.Duration {
			quiet()
			gr, _, gout, err := goSDKFullExec(g, "echo hello", goReadOutput)
			if err != nil {
				b.Fatal(err)
			}
			if string(gout) != "hello\n" {
				b.Fatalf("local echo hello: go-sdk %q", gout)
			}
			return gr
		}
		spawn := func() time.Duration {
			quiet()
			sp := ts.mustDo(b, map[string]any{"op": "spawn", "command": "echo hello"})
			if sp.Bytes != 6 {
				b.Fatalf("local echo hello: node spawn %d bytes", sp.Bytes)
			}
			return msDur(sp.MS)
		}
		// turns runs one call then the other, the other first on odd
		// rounds, and returns their times in the order given.
		turns := func(j int, one, other func() time.Duration) (t1, t2 time.Duration) {
			if j%2 == 0 {
				t1 = one()
				return t1, other()
			}
			t2 = other()
			return one(), t2
		}
		local := &tsRow{name: "local echo hello", metric: "local-echo", target: 0.6}
		overHTTP := &tsRow{name: "local echo hello HTTP", metric: "local-echo-http", target: 1.2}
		httpFloor := &tsRow{name: "HTTP round trip alone", metric: "http-floor"}
		noopHTTP := &tsRow{name: "no-op server HTTP", metric: "noop-http"}
		for j := 0; j < 300+warm; j++ {
			st, ht := turns(j, func() time.Duration { return tsLocal(ts) }, func() time.Duration { return tsLocal(tsHTTP) })
			// The HTTP floor: the client's own POST to a handler that
			// answers at once, on the same kind of kept-alive connection.
			quiet()
			ff := tsHTTP.mustDo(b, map[string]any{"op": "fetch", "url": floorSrv.URL})
			sp := spawn()
			if j >= warm {
				local.ts, local.base = append(local.ts, st), append(local.base, sp)
				overHTTP.ts, httpFloor.ts = append(overHTTP.ts, ht), append(httpFloor.ts, msDur(ff.MS))
			}
		}
		var goSpawn latencies
		for j := 0; j < 300+warm; j++ {
			sg, hg := turns(j, func() time.Duration { return goLocalCall(goLocal) }, func() time.Duration { return goLocalCall(goHTTP) })
			quiet()
			gf := goPOSTFloor(b, floorSrv.URL)
			sp := spawn()
			if j >= warm {
				local.gosdk, goSpawn = append(local.gosdk, sg), append(goSpawn, sp)
				overHTTP.gosdk, httpFloor.gosdk = append(overHTTP.gosdk, hg), append(httpFloor.gosdk, gf)
			}
		}
		local.goBase = goSpawn
		// The same clients against a go-sdk server whose one tool does
		// nothing, over stdio and over HTTP: what the SDK's transports cost
		// on their own, so that tandem's share of HTTP's extra time can be
		// told. They start only now, so that nothing of theirs runs beside
		// tandem's measurements.
		noopURL := startNoopHTTP(b)
		noopTS := startTSClientCmd(b, nil, os.Args[0], noopServerArg)
		noopTSHTTP := startTSClientEnv(b, nil, "--http", noopURL)
		for _, c := range []*tsClient{noopTS, noopTSHTTP} {
			c.mustDo(b, map[string]any{"op": "adopt", "name": "local", "token": "noop"})
		}
		noopGo, noopGoHTTP := noopGoSDK(b, ""), noopGoSDK(b, noopURL)
		for j := 0; j < 300+warm; j++ {
			ns, nh := turns(j, func() time.Duration { return tsLocal(noopTS) }, func() time.Duration { return tsLocal(noopTSHTTP) })
			if j >= warm {
				noopHTTP.ts, noopHTTP.base = append(noopHTTP.ts, nh), append(noopHTTP.base, ns)
			}
		}
		for j := 0; j < 300+warm; j++ {
			ns, nh := turns(j, func() time.Duration { return goLocalCall(noopGo) }, func() time.Duration { return goLocalCall(noopGoHTTP) })
			if j >= warm {
				noopHTTP.gosdk, noopHTTP.goBase = append(noopHTTP.gosdk, nh), append(noopHTTP.goBase, ns)
			}
		}
		overHTTP.base, overHTTP.goBase = local.ts, local.gosdk
		httpFloor.base, httpFloor.goBase = local.ts, local.gosdk
		// Each call is a POST or two: on kept-alive connections the clients
		// open a few in all, not one per call.
		conns := len(hs.clientPorts(b))
		if conns > 16 {
			b.Fatalf("%d TCP connections to the HTTP server for %d calls: keep-alive is not holding", conns, 2*(300+warm))
		}
		rows = append(rows, local, overHTTP, httpFloor, noopHTTP)
		rows = append(rows, &tsRow{name: "seq encode alone", metric: "encode-alone", ts: nodeCodec, gosdk: goCodecs, base: reply.base, goBase: reply.goBase})

		// testing keeps 10 lines of a benchmark's log, fewer than the
		// table has: it goes to stdout, which go test shows whole.
		var report strings.Builder
		fmt.Fprintf(&report, "baseline: the floor over SSH, node spawning bash for local, each client's own stdio call for HTTP (%d connections for %d calls: keep-alive); "+
			"seq = %s, %d bytes, full delivery = the reply plus the whole stdout read back from offset 0 by resources/read (ssh seq full) or ssh_read_output (seq full read_output), each client measured on its own beside the floor; "+
			"encode alone = that output as one JSON string encoded and decoded, JSON.stringify+parse in node (TS), encoding/json (go-sdk); "+
			"HTTP round trip alone = each client's bare POST to a handler that answers at once (node fetch, Go net/http), over its stdio call\n",
			conns, 2*(300+warm), seq, seqBytes)
		fmt.Fprintf(&report, "%-21s | %8s %8s | %8s %8s | %8s %8s | %7s %7s | %s\n",
			"case", "TS p50", "TS p90", "go p50", "go p90", "base p50", "base p90", "TS/base", "go/base", "TS target")
		for _, r := range rows {
			base, goBase := float64(r.base.pct(.5)), float64(r.base.pct(.5))
			if r.goBase != nil {
				goBase = float64(r.goBase.pct(.5))
			}
			tsRatio, goRatio := float64(r.ts.pct(.5))/base, float64(r.gosdk.pct(.5))/goBase
			verdict := "-"
			switch {
			case r.target == 0:
			case tsRatio > r.target:
				verdict = fmt.Sprintf("<=%.1fx MISSED", r.target)
			default:
				verdict = fmt.Sprintf("<=%.1fx met", r.target)
			}
			fmt.Fprintf(&report, "%-21s | %6.2fms %6.2fms | %6.2fms %6.2fms | %6.2fms %6.2fms | %6.2fx %6.2fx | %s\n", r.name,
				ms(r.ts.pct(.5)), ms(r.ts.pct(.9)), ms(r.gosdk.pct(.5)), ms(r.gosdk.pct(.9)), ms(r.base.pct(.5)), ms(r.base.pct(.9)),
				tsRatio, goRatio, verdict)
			b.ReportMetric(tsRatio, "ts-"+r.metric+"-ratio")
			b.ReportMetric(goRatio, "gosdk-"+r.metric+"-ratio")
		}
		// HTTP's extra time, tandem's and the no-op server's: the
		// difference is what tandem adds to the SDK's HTTP path, and
		// tandem's stdio call plus the no-op server's extra time is the
		// least any server on the SDK's handler could reach.
		for _, c := range []struct {
			name                         string
			stdio, http, noopStdio, noop latencies
		}{
			{"ts", local.ts, overHTTP.ts, noopHTTP.base, noopHTTP.ts},
			{"gosdk", local.gosdk, overHTTP.gosdk, noopHTTP.goBase, noopHTTP.gosdk},
		} {
			extra := c.http.pct(.5) - c.stdio.pct(.5)
			sdkExtra := c.noop.pct(.5) - c.noopStdio.pct(.5)
			least := float64(c.stdio.pct(.5)+sdkExtra) / float64(c.stdio.pct(.5))
			fmt.Fprintf(&report, "HTTP over stdio, %-5s p50: tandem +%.2fms, the no-op go-sdk server +%.2fms, tandem's own +%.2fms; "+
				"tandem's stdio call plus the SDK's own extra = %.2fx (the least a server on the SDK's handler reaches; target 1.2x)\n",
				c.name, ms(extra), ms(sdkExtra), ms(extra-sdkExtra), least)
			b.ReportMetric(float64((extra - sdkExtra).Microseconds()), c.name+"-http-own-us")
			b.ReportMetric(least, c.name+"-http-least-ratio")
		}
		fmt.Print(report.String())
	}
}

// benchPolicy is a config with one local target rooted at ws and a policy
// of the kind an operator writes: ask by default, the loop's commands
// allowed by rules, deletions denied.
func benchPolicy(ws string) string {
	return "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + `policy:
  mode: ask
  rules:
    - {tool: ssh_connect, decision: allow}
    - {tool: ssh_disconnect, decision: allow}
    - {command: "true", decision: allow}
    - {command: "echo *", decision: allow}
    - {command: "seq *", decision: allow}
    - {command: "git status", decision: allow}
    - {command: "git diff *", decision: allow}
    - {command: "rm -rf *", decision: deny}
    - {command: "sudo *", decision: ask}
`
}
