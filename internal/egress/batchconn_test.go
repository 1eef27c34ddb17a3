package egress

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestBatchConn: a batchConn sends every byte in order, a lone small
// write at once (a stream is not held back for more), what is queued
// before Close, and fails writes after the peer has gone.
func TestBatchConn(t *testing.T) {
	tests := []struct {
		name   string
		writes [][]byte
	}{
		{"one small write", [][]byte{[]byte("hello")}},
		{"records", [][]byte{bytes.Repeat([]byte("a"), 16<<10), bytes.Repeat([]byte("b"), 16<<10), []byte("c")}},
		{"larger than a batch", [][]byte{bytes.Repeat([]byte("0123456789"), batchMax/5)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, peer := tcpPair(t)
			b := newBatchConn(a)
			t.Cleanup(func() { _ = b.Close() })
			var want []byte
			for _, w := range tc.writes {
				if n, err := b.Write(w); err != nil || n != len(w) {
					t.Fatalf("write: %d, %v", n, err)
				}
				want = append(want, w...)
			}
			got := make([]byte, len(want))
			_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(peer, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the peer read %d bytes (%v), not what was written", len(got), err)
			}
		})
	}

	t.Run("close sends what is queued", func(t *testing.T) {
		a, peer := tcpPair(t)
		b := newBatchConn(a)
		want := bytes.Repeat([]byte("z"), 3*batchMax)
		go func() { _, _ = b.Write(want); _ = b.Close() }()
		_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(peer)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d of %d bytes before the end: %v", len(got), len(want), err)
		}
	})

	t.Run("writes fail once the peer is gone", func(t *testing.T) {
		a, peer := tcpPair(t)
		b := newBatchConn(a)
		t.Cleanup(func() { _ = b.Close() })
		_ = peer.(*net.TCPConn).SetLinger(0)
		_ = peer.Close() // a reset: the next sends fail
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := b.Write(make([]byte, 16<<10)); err != nil {
				return
			}
		}
		t.Fatal("writes kept succeeding after the peer reset the connection")
	})
}

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}
