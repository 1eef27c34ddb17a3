package fdpass_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/fdpass"
)

// TestPassesOneDescriptor: a descriptor sent on the child end arrives on
// the parent end as a new, close-on-exec descriptor of the same file; a
// child end closed without sending fails Receive at once; a context that
// ends stops the wait.
func TestPassesOneDescriptor(t *testing.T) {
	tests := []struct {
		name    string
		send    bool
		wantErr error
	}{
		{"sent", true, nil},
		{"closed unsent", false, fdpass.ErrNotSent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent, child, err := fdpass.Pair("test")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = parent.Close() })
			f, err := os.CreateTemp(t.TempDir(), "x")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close() })
			if tc.send {
				if err := fdpass.Send(int(child.Fd()), int(f.Fd())); err != nil {
					t.Fatal(err)
				}
			}
			_ = child.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			fd, err := fdpass.Receive(ctx, parent)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Receive: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer unix.Close(fd)
			var a, b unix.Stat_t
			if unix.Fstat(fd, &a) != nil || unix.Fstat(int(f.Fd()), &b) != nil || a.Ino != b.Ino {
				t.Fatalf("the received descriptor is not the sent file")
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Fatalf("the received descriptor is not close-on-exec (%d, %v)", flags, err)
			}
		})
	}
	t.Run("context ends", func(t *testing.T) {
		parent, child, err := fdpass.Pair("test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = parent.Close(); _ = child.Close() })
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := fdpass.Receive(ctx, parent); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive with nothing sent: %v, want the context's end", err)
		}
	})
}
