package session

import (
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestMergeTouch: a viewer's keys in one of the agent's commands gather in
// one entry per command and viewer, counted; one hidden key marks the
// entry masked; what is kept is bounded.
func TestMergeTouch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	key := func(cmd, viewer string, keys, enters int, masked bool, intr string, sec int) shell.Touch {
		return shell.Touch{CommandID: cmd, Command: "c " + cmd, Viewer: viewer, Keys: keys, Enters: enters, Masked: masked, Interrupt: intr, At: t0.Add(time.Duration(sec) * time.Second)}
	}
	tests := []struct {
		name string
		in   []shell.Touch
		want []Touch
	}{
		{"one answer typed key by key", []shell.Touch{key("a", "bob", 1, 0, false, "", 0), key("a", "bob", 1, 1, false, "", 1)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 2, Enters: 1, At: t0, Last: t0.Add(time.Second)}}},
		{"a hidden key marks it masked", []shell.Touch{key("a", "bob", 2, 0, false, "", 0), key("a", "bob", 2, 0, true, "", 1), key("a", "bob", 1, 1, false, "", 2)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 5, Enters: 1, Masked: true, At: t0, Last: t0.Add(2 * time.Second)}}},
		{"interrupt", []shell.Touch{key("a", "bob", 1, 0, false, "", 0), key("a", "bob", 1, 0, false, "Ctrl-C", 0), key("a", "bob", 1, 0, false, "", 1)},
			[]Touch{{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 3, Interrupt: "Ctrl-C", At: t0, Last: t0.Add(time.Second)}}},
		{"per command and viewer", []shell.Touch{key("a", "bob", 1, 0, false, "", 0), key("b", "bob", 1, 0, false, "", 1), key("a", "eve", 1, 0, false, "", 2), key("a", "bob", 1, 0, false, "", 3)},
			[]Touch{
				{CommandID: "a", Command: "c a", Viewer: "bob", Keys: 2, At: t0, Last: t0.Add(3 * time.Second)},
				{CommandID: "b", Command: "c b", Viewer: "bob", Keys: 1, At: t0.Add(time.Second), Last: t0.Add(time.Second)},
				{CommandID: "a", Command: "c a", Viewer: "eve", Keys: 1, At: t0.Add(2 * time.Second), Last: t0.Add(2 * time.Second)},
			}},
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
			got = mergeTouch(got, key(string(rune('A'+i)), "bob", 1, 0, false, "", i))
		}
		if len(got) != maxTouches || got[0].CommandID != "D" {
			t.Errorf("kept %d, the first %s", len(got), got[0].CommandID)
		}
	})
}
