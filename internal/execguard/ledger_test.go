package execguard

import (
	"os"
	"testing"
	"time"
)

// at is the tick of t, as a fork at t would show in /proc/PID/stat.
func at(t time.Time) Origin {
	return Origin{Known: true, Forked: Ticks((bootNS() - int64(time.Since(t))) / tickNS)}
}

// TestLedgerHuman: a fork is a person's only inside a person's span and
// in no tick an agent's span touches; unknown origins, idle time, and
// forgotten time are the agent's.
func TestLedgerHuman(t *testing.T) {
	base := time.Now().Add(-10 * time.Second)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	var l Ledger
	l.Add(Span{Owner: Agent, From: ms(0), To: ms(1000)})
	l.Add(Span{Owner: Human, From: ms(2000), To: ms(3000)})
	// A person's line typed during the agent's command, run as it ended.
	l.Add(Span{Owner: Agent, From: ms(4000), To: ms(5000)})
	l.Add(Span{Owner: Human, From: ms(4500), To: ms(6000)})
	running := Span{Owner: Human, From: ms(9000)}
	tests := []struct {
		name    string
		o       Origin
		running []Span
		want    bool
	}{
		{"unknown origin", Origin{}, nil, false},
		{"in an agent's span", at(ms(500)), nil, false},
		{"idle, between commands", at(ms(1500)), nil, false},
		{"in a person's span", at(ms(2500)), nil, true},
		{"a person's span's first tick", at(ms(2000)), nil, true},
		{"just after a person's span", at(ms(3050)), nil, false},
		{"where both spans meet", at(ms(4800)), nil, false},
		{"the agent's last tick, shared", at(ms(5000)), nil, false},
		{"the person's own time after the agent's", at(ms(5100)), nil, true},
		{"in a running person's command", at(ms(9500)), []Span{running}, true},
		{"before a running person's command", at(ms(8900)), []Span{running}, false},
		{"in a running agent's command", at(ms(9500)), []Span{running, {Owner: Agent, From: ms(9400)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.Human(tt.o, tt.running...); got != tt.want {
				t.Errorf("Human(%+v) = %v, want %v", tt.o, got, tt.want)
			}
		})
	}
}

// TestLedgerForgets: past MaxSpans the oldest spans are forgotten, and a
// fork in their time is the agent's.
func TestLedgerForgets(t *testing.T) {
	base := time.Now().Add(-2 * time.Minute)
	var l Ledger
	l.Add(Span{Owner: Human, From: base, To: base.Add(time.Second)})
	old := at(base.Add(500 * time.Millisecond))
	if !l.Human(old) {
		t.Fatal("a fork in a person's span is not theirs")
	}
	for i := range MaxSpans {
		s := base.Add(time.Second + time.Duration(i)*time.Millisecond*50)
		l.Add(Span{Owner: Agent, From: s, To: s.Add(10 * time.Millisecond)})
	}
	if len(l.spans) != MaxSpans {
		t.Fatalf("%d spans kept, want %d", len(l.spans), MaxSpans)
	}
	if l.Human(old) {
		t.Fatal("a fork in a forgotten span is still a person's")
	}
}

// TestUserHZ: the kernel's clock tick (AT_CLKTCK in the auxiliary vector,
// what sysconf(_SC_CLK_TCK) returns) is the one Ticks assumes.
func TestUserHZ(t *testing.T) {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Fatal(err)
	}
	const atClkTck = 17
	for i := 0; i+16 <= len(b); i += 16 {
		k := uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24
		v := uint64(b[i+8]) | uint64(b[i+9])<<8 | uint64(b[i+10])<<16 | uint64(b[i+11])<<24
		if k == atClkTck {
			if v != userHZ {
				t.Fatalf("AT_CLKTCK is %d, Ticks assumes %d", v, userHZ)
			}
			return
		}
	}
	t.Fatal("no AT_CLKTCK in /proc/self/auxv")
}
