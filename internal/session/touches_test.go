package session

import (
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestMergeTouch: a viewer's keys in one of the agent's commands gather in
// one entry per command and viewer; once a key was hidden, none of the
// keys is kept, only counted; what is kept is bounded.
func TestMergeTouch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	key := func(cmd, viewer, in string, masked bool, intr string, sec int) shell.Touch {
		tc := shell.Touch{CommandID: cmd, Command: "c " + cmd, Viewer: viewer, Keys: len(in), Masked: masked, Interrupt: intr, At: t0.Add(time.Duration(sec) * time.Second)}
		if !masked {
			tc.Input = []byte(in)
		}
		return tc
	}
	long := strings.Repeat("x", MaxTouchInput-1)
	tests := []struct {
		name string
		in   []shell.Touch
		want []Touch
	}{
		{"one answer typed key by key", []shell.Touch{key("a", "bob", "y", false, "", 0), key("a", "bob", "\r", false, "", 1)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 2, Input: "y\r", At: t0, Last: t0.Add(time.Second)}}},
		{"a hidden key hides all", []shell.Touch{key("a", "bob", "ab", false, "", 0), key("a", "bob", "pw", true, "", 1), key("a", "bob", "\r", false, "", 2)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 5, Masked: true, At: t0, Last: t0.Add(2 * time.Second)}}},
		{"interrupt", []shell.Touch{key("a", "bob", "q", false, "", 0), key("a", "bob", "\x03", false, "Ctrl-C", 0)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 2, Input: "q\x03", Interrupt: "Ctrl-C", At: t0, Last: t0}}},
		{"per command and viewer", []shell.Touch{key("a", "bob", "1", false, "", 0), key("b", "bob", "2", false, "", 1), key("a", "eve", "3", false, "", 2), key("a", "bob", "4", false, "", 3)},
			[]Touch{
				{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 2, Input: "14", At: t0, Last: t0.Add(3 * time.Second)},
				{CommandID: "b", Command: "c b", Viewer: "bob", Keys: 1, Input: "2", At: t0.Add(time.Second), Last: t0.Add(time.Second)},
				{CommandID: "a", Command: "c a", Viewer: "eve", Keys: 1, Input: "3", At: t0.Add(2 * time.Second), Last: t0.Add(2 * time.Second)},
			}},
		{"bounded", []shell.Touch{key("a", "bob", long, false, "", 0), key("a", "bob", "yz", false, "", 0), key("a", "bob", "more", false, "", 0)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: len(long) + 6, Input: long + "y", InputTruncated: true, At: t0, Last: t0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Touch
			for _, in := range tc.in {
				got = mergeTouch(got, in)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("entry %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
	t.Run("the oldest go past the bound", func(t *testing.T) {
		var got []Touch
		for i := range maxTouches + 3 {
			got = mergeTouch(got, key(string(rune('A'+i)), "bob", "k", false, "", i))
		}
		if len(got) != maxTouches || got[0].CommandID != "D" {
			t.Errorf("kept %d, the first %s", len(got), got[0].CommandID)
		}
	})
}
