package execguard

import (
	"errors"
	"testing"
)

func TestAvailableVerdict(t *testing.T) {
	const all = "kill_process kill_thread trap errno user_notif trace log allow\n"
	tests := []struct {
		actions, release string
		ok               bool
	}{
		{all, "6.18.44-fc-v782", true},
		{all, "5.5.0", true},
		{all, "5.4.0-generic", false}, // no SECCOMP_USER_NOTIF_FLAG_CONTINUE
		{all, "4.19.0", false},        // no user notification at all
		{"kill_process errno allow", "6.1.0", false},
		{all, "garbage", false},
		{"", "6.1.0", false},
	}
	for _, tt := range tests {
		err := available(tt.actions, tt.release)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUnavailable)) {
			t.Errorf("available(%q, %q) = %v, want ok %v and ErrUnavailable otherwise", tt.actions, tt.release, err, tt.ok)
		}
	}
}

// TestProgramJumps: every jump of the filter lands inside it, on an
// instruction after the jump, and the program ends in returns.
func TestProgramJumps(t *testing.T) {
	a, ok := hostArchs()
	if !ok {
		t.Skip("exec judging is not built for this architecture")
	}
	prog := program(a, Filter{Execs: true, Listens: true})
	for i, in := range prog {
		if in.Code&0x07 != 0x05 { // not BPF_JMP: falls through or returns
			continue
		}
		for _, off := range []uint8{in.Jt, in.Jf} {
			if i+1+int(off) >= len(prog) {
				t.Fatalf("instruction %d jumps past the end", i)
			}
		}
	}
	if last := prog[len(prog)-1]; last.Code != 0x06 { // BPF_RET|BPF_K
		t.Fatalf("the program ends in %#x, not a return", last.Code)
	}
}
