package web_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/web"
)

// listen calls web.Listen and returns the listener and what it logged.
func listen(t *testing.T, addr string, allowRemote bool) (net.Listener, string, error) {
	t.Helper()
	var logged bytes.Buffer
	ln, err := web.Listen(t.Context(), addr, &web.ListenOptions{
		Logger:      slog.New(slog.NewTextHandler(&logged, nil)),
		AllowRemote: allowRemote,
	})
	if ln != nil {
		t.Cleanup(func() { ln.Close() })
	}
	return ln, logged.String(), err
}

func TestListenDefaultIsLoopback(t *testing.T) {
	ln, logged, err := listen(t, "", false)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() || addr.Port == 0 {
		t.Errorf("Listen(\"\") = %v, want 127.0.0.1 on a kernel-picked port", addr)
	}
	if logged != "" {
		t.Errorf("unexpected log: %s", logged)
	}
}

func TestListenPortTakenFallsBack(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port

	ln, logged, err := listen(t, taken.Addr().String(), false)
	if err != nil {
		t.Fatalf("Listen on a taken port: %v", err)
	}
	got := ln.Addr().(*net.TCPAddr)
	if got.Port == port || !got.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("Listen = %v, want 127.0.0.1 on another port than %d", got, port)
	}
	want := fmt.Sprintf("port %d on 127.0.0.1 is in use; listening on %s instead", port, ln.Addr())
	if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, want) {
		t.Errorf("log = %q, want a warning containing %q", logged, want)
	}
}

func TestListenRefusesRemote(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		ln, _, err := listen(t, addr, false)
		if !errors.Is(err, web.ErrNotLoopback) {
			t.Errorf("Listen(%q) = %v, %v; want ErrNotLoopback", addr, ln, err)
		}
	}
	for _, addr := range []string{"localhost:0", "127.0.0.2:0"} {
		if _, _, err := listen(t, addr, false); err != nil {
			t.Errorf("Listen(%q): %v, want a loopback listener", addr, err)
		}
	}
}

func TestListenAllowRemoteWarns(t *testing.T) {
	ln, logged, err := listen(t, "0.0.0.0:0", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "not loopback") {
		t.Errorf("Listen(0.0.0.0, AllowRemote) on %v logged %q, want a warning", ln.Addr(), logged)
	}
}
