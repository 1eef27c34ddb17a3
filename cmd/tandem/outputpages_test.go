package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestOutputPagesFitTheTSClient: a page of a command's output resource
// stays under the TypeScript SDK's 10 MiB message limit however its bytes
// escape in JSON. Output of control characters (\u0001: six bytes each)
// or of <, > and & (which JSON may escape the same way) made a 4 MiB page
// a 24 MiB message, and the SDK's stdio transport dropped the connection:
// a program in the session could cut its agent off by printing them.
func TestOutputPagesFitTheTSClient(t *testing.T) {
	const n = 5 << 20
	tests := []struct {
		name, command string
		want          []byte
	}{
		{"control characters", "head -c 5242880 /dev/zero | tr '\\0' '\\1'", bytes.Repeat([]byte{1}, n)},
		{"html characters", "head -c 5242880 /dev/zero | tr '\\0' '<'", bytes.Repeat([]byte("<"), n)},
	}
	c := startTSClient(t, "serve", "--web", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workspace", t.TempDir())
	if _, err := c.do(map[string]any{"op": "connect", "name": "pages"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		for _, via := range []string{"resources/read", "ssh_read_output"} {
			r, err := c.do(map[string]any{"op": "exec", "session": "pages", "command": tc.command, "full": true, "via": via})
			if err != nil {
				t.Fatalf("%s via %s: %v", tc.name, via, err)
			}
			sum := sha256.Sum256(tc.want)
			if r.Bytes != n || r.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("%s via %s: read %d bytes (sha256 %s), want %d", tc.name, via, r.Bytes, r.SHA256, n)
			}
		}
	}
}
