//go:build !linux

package quickack

import "net"

// Wrap returns nc: TCP_QUICKACK is Linux's (see quickack_linux.go).
func Wrap(nc net.Conn) net.Conn { return nc }
