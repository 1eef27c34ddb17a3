package main

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// cutProxy is a TCP proxy to PostgreSQL that the test can cut, as a
// network partition between one node and the database would.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// setCut cuts (closing every connection) or restores the link.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestNodeFenced: a node cut off from PostgreSQL runs nothing meanwhile
// (store_unavailable); its neighbour ends its sessions with node_lost
// after the lease. When the link returns, the node learns it was declared
// lost, ends its own shells and stops with an error saying so, rather than
// serve sessions the rest of the cluster has ended.
func TestNodeFenced(t *testing.T) {
	pg := testenv.Postgres(t)
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCutProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.ln.Addr().String()
	q := viaProxy.Query()
	q.Set("connect_timeout", "2")
	viaProxy.RawQuery = q.Encode()
	ws := t.TempDir()
	cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n"
	a := startHTTP(t, httpOpts{config: cfg, args: []string{"--store", viaProxy.String()}})
	b := startHTTP(t, httpOpts{config: cfg, args: []string{"--store", pg}})
	ca := a.client(t, a.token(t, "--tenant", "default", "--actor", "alice"))
	tok := str(mustOK(t, ca.Call(t, "ssh_connect", map[string]any{"name": "cut"}))["sessionToken"])
	call := func() map[string]any {
		return ca.Call(t, "ssh_exec", map[string]any{"sessionName": "cut", "sessionToken": tok, "command": "echo hi"})
	}
	mustOK(t, call())

	proxy.setCut(true)
	cutAt := time.Now()
	e := wantError(t, call(), "store_unavailable")
	if d := time.Since(cutAt); d > 12*time.Second {
		t.Errorf("store_unavailable came after %v", d)
	}
	if !strings.Contains(str(e["message"]), "PostgreSQL") {
		t.Errorf("store_unavailable message: %v", e["message"])
	}
	lost := func() bool {
		out, err := tandemCLI(t, "audit", "tail", "--store", pg, "--json", "-n", "100")
		return err == nil && strings.Contains(out, `"event":"node_lost"`)
	}
	if !waitFor(40*time.Second, lost) {
		t.Fatalf("B did not end the cut-off node's session within 40 s:\n%s", lastN(b.log(), 3000))
	}
	proxy.setCut(false)
	// The harness reaps the process; Signal(0) says when it is gone.
	gone := func() bool { return errors.Is(a.cmd.Process.Signal(syscall.Signal(0)), os.ErrProcessDone) }
	if !waitFor(30*time.Second, gone) {
		t.Fatalf("the node declared lost still runs 30 s after its link returned:\n%s", lastN(a.log(), 3000))
	}
	if l := a.log(); !strings.Contains(l, "was declared lost by the other nodes") || !strings.Contains(l, "restart it") {
		t.Errorf("the fenced node did not stop with an error saying why:\n%s", lastN(l, 2000))
	}
}
