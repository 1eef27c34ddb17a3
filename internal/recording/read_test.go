package recording_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/recording"
)

func TestReadAccepts(t *testing.T) {
	cast := `{"version":2,"width":80,"height":24,"timestamp":1700000000,"idle_time_limit":2.5}` + "\n" +
		`[0, "o", "a"]` + "\n" +
		`[0.5, "m", "chapter"]` + "\n" +
		`[0.5, "r", "100x40"]` + "\n" +
		`[1.25e0, "i", "\u00e9"]` // no final newline
	h, events, err := recording.Read(strings.NewReader(cast))
	if err != nil {
		t.Fatal(err)
	}
	want := []recording.Event{
		{0, "o", "a"},
		{500 * time.Millisecond, "m", "chapter"},
		{500 * time.Millisecond, "r", "100x40"},
		{1250 * time.Millisecond, "i", "é"},
	}
	if h.Timestamp != 1700000000 || h.IdleTimeLimit != 2.5 || len(events) != len(want) {
		t.Fatalf("header %+v, events %q", h, events)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, events[i], want[i])
		}
	}
}

func TestReadRejects(t *testing.T) {
	const header = `{"version":2,"width":80,"height":24}` + "\n"
	for name, cast := range map[string]string{
		"empty":            "",
		"version 1":        `{"version":1,"width":80,"height":24}` + "\n",
		"no size":          `{"version":2}` + "\n",
		"header not json":  "hello\n",
		"time goes back":   header + `[1, "o", "a"]` + "\n" + `[0.5, "o", "b"]` + "\n",
		"negative time":    header + `[-1, "o", "a"]` + "\n",
		"time too large":   header + `[1e300, "o", "a"]` + "\n",
		"unknown code":     header + `[1, "x", "a"]` + "\n",
		"two fields":       header + `[1, "o"]` + "\n",
		"four fields":      header + `[1, "o", "a", "b"]` + "\n",
		"string time":      header + `["1", "o", "a"]` + "\n",
		"number data":      header + `[1, "o", 5]` + "\n",
		"object event":     header + `{"t":1}` + "\n",
		"blank line":       header + "\n" + `[1, "o", "a"]` + "\n",
		"truncated line":   header + `[1, "o", "a`,
		"invalid UTF-8":    header + "[1, \"o\", \"\xff\"]\n",
		"bad resize":       header + `[1, "r", "80 by 24"]` + "\n",
		"zero-size resize": header + `[1, "r", "0x24"]` + "\n",
	} {
		_, _, err := recording.Read(strings.NewReader(cast))
		if !errors.Is(err, recording.ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", name, err)
		}
	}
}
