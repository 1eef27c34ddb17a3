package term_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/term"
)

func TestRing(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		writes  []string
		held    string // Len() bytes, oldest first
		snap    string
		dropped int64
	}{
		{"empty", 8, nil, "", "", 0},
		{"fits", 8, []string{"ab", "cd\nef"}, "abcd\nef", "abcd\nef", 0},
		{"exactly full", 4, []string{"ab\n", "c"}, "ab\nc", "ab\nc", 0},
		{"drop ends at newline", 8, []string{"line1\n", "line2\nxy"}, "line2\nxy", "xy", 6},
		{"wrap mid line", 8, []string{"line1\n", "line2\nxyz"}, "ine2\nxyz", "xyz", 7},
		{"wrap in second half", 6, []string{"abcdef", "gh\ni"}, "efgh\ni", "i", 4},
		{"wrap no newline", 4, []string{"abc", "def"}, "cdef", "cdef", 2},
		{"newline last", 4, []string{"abcd", "ef\n"}, "def\n", "", 3},
		{"write bigger than ring", 4, []string{"ab", "cdefg\nh"}, "fg\nh", "h", 5},
		{"write equal to ring", 4, []string{"ab", "c\nde"}, "c\nde", "de", 2},
		{"many wraps", 5, []string{"12", "34", "56", "7\n8", "9"}, "67\n89", "89", 5},
		{"zero", 0, []string{"abc"}, "", "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := term.NewRing(tt.max)
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if r.Len() != len(tt.held) {
				t.Errorf("Len() = %d, want %d", r.Len(), len(tt.held))
			}
			if got := string(r.Snapshot()); got != tt.snap {
				t.Errorf("Snapshot() = %q, want %q", got, tt.snap)
			}
			if r.Dropped() != tt.dropped {
				t.Errorf("Dropped() = %d, want %d", r.Dropped(), tt.dropped)
			}
		})
	}
}

// The held bytes are always the last max bytes written.
func TestRingKeepsTail(t *testing.T) {
	var all []byte
	r := term.NewRing(7)
	for i := range 50 {
		w := bytes.Repeat([]byte{byte('a' + i%26)}, i%11)
		all = append(all, w...)
		r.Write(w)
		want := all[max(0, len(all)-7):]
		if r.Dropped() == 0 && !bytes.Equal(r.Snapshot(), want) {
			t.Fatalf("after %d writes: %q, want %q", i, r.Snapshot(), want)
		}
		if r.Len() != len(want) || r.Dropped() != int64(len(all)-len(want)) {
			t.Fatalf("after %d writes: Len %d Dropped %d", i, r.Len(), r.Dropped())
		}
	}
}

func TestRingSnapshotIsCopy(t *testing.T) {
	r := term.NewRing(8)
	r.Write([]byte("abc"))
	s := r.Snapshot()
	s[0] = 'X'
	if got := string(r.Snapshot()); got != "abc" {
		t.Errorf("Snapshot changed by caller: %q", got)
	}
}

func TestRingConcurrent(t *testing.T) {
	r := term.NewRing(64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				r.Write([]byte("line of output\n"))
				r.Snapshot()
				r.Len()
				r.Dropped()
			}
		})
	}
	wg.Wait()
	if got := r.Dropped() + int64(r.Len()); got != 4*1000*15 {
		t.Errorf("Dropped+Len = %d, want %d", got, 4*1000*15)
	}
}

func TestRingReadAt(t *testing.T) {
	r := term.NewRing(8)
	var all []byte
	for i := range 50 {
		p := []byte{byte('a' + i%26), byte('A' + i%26), '0' + byte(i%10)}
		_, _ = r.Write(p)
		all = append(all, p...)
		end := r.End()
		if end != int64(len(all)) {
			t.Fatalf("End = %d, want %d", end, len(all))
		}
		for off := int64(0); off <= end; off++ {
			buf := make([]byte, 5)
			n, ok := r.ReadAt(buf, off)
			held := off >= end-int64(r.Len())
			if ok != held {
				t.Fatalf("offset %d of %d: ok %v, want %v", off, end, ok, held)
			}
			if ok {
				want := all[off:min(int(off)+5, len(all))]
				if string(buf[:n]) != string(want) {
					t.Fatalf("offset %d: %q, want %q", off, buf[:n], want)
				}
			}
		}
	}
}
