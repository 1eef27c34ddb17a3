package sshconn

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestParseEcho: the helper's answers, as GNU, BusyBox and BSD stty print
// them (joined into one line by the helper), and its failures.
func TestParseEcho(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		on, err      bool
	}{
		{"gnu cooked", "ok speed 38400 baud; rows 24; columns 80; line = 0; intr = ^C; quit = ^\\; " +
			"isig icanon iexten echo echoe echok -echonl -noflsh", true, false},
		{"gnu password", "ok speed 38400 baud; line = 0; isig icanon iexten -echo echoe echok -echonl", false, false},
		{"gnu readline", "ok speed 38400 baud; isig -icanon iexten -echo echoe echok", true, false},
		{"busybox", "ok speed 38400 baud;stty: line = 0; intr = ^C isig icanon iexten -echo echoe echok", false, false},
		{"bsd", "ok speed 9600 baud; 24 rows; 80 columns; lflags: icanon isig iexten -echo echoe -echok echoke", false, false},
		{"echoctl is not echo", "ok icanon echoctl echoke -echo", false, false},
		{"stty failed", "err stty: 'standard input': Inappropriate ioctl for device", false, true},
		{"no flags", "ok speed 38400 baud", false, true},
		{"empty", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, err := parseEcho(tc.answer)
			if (err != nil) != tc.err || err == nil && on != tc.on {
				t.Fatalf("parseEcho = %v, %v; want %v (error: %v)", on, err, tc.on, tc.err)
			}
		})
	}
}

// TestEchoHelperFailureRemembered: a helper that cannot start is not tried
// again for every key: the next question gets the same failure at once.
func TestEchoHelperFailureRemembered(t *testing.T) {
	c := newConn("test", nil, nil)
	c.closed = true // openSession refuses: no channel can be opened
	if _, err := c.ShellInputEchoed(context.Background(), 42); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("first question: %v, want net.ErrClosed", err)
	}
	first := c.helpers.failedAt
	if _, err := c.ShellInputEchoed(context.Background(), 42); !errors.Is(err, net.ErrClosed) || c.helpers.failedAt != first {
		t.Fatalf("second question: %v, tried again: %v", err, c.helpers.failedAt != first)
	}
}
