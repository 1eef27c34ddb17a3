//go:build !linux

package sshconn

import "net"

// withQuickAck returns nc: TCP_QUICKACK is Linux's (see quickack_linux.go).
func withQuickAck(nc net.Conn) net.Conn { return nc }
