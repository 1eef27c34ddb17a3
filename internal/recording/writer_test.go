package recording_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/recording"
)

// chunks is terminal output as a PTY might deliver it: characters split
// across reads, bytes that are not UTF-8, and every character JSON escapes.
var chunks = []string{
	"$ echo caf", "\xc3", "\xa9 \xf0\x9f", "\x98", "\x80 done\r\n", // é and 😀 split
	"bad \xff\xfe \xe2( \xed\xa0\x80 \xc0\xaf\r\n", // invalid bytes, a surrogate, overlong
	"\x1b[31m\"quoted\" back\\slash\x00\x07\x7f\u2028\u2029\x1b[0m\t|\n",
	"ends mid-character \xe2\x82", // never finished: U+FFFD twice at Close
}

// valid is what a stream of bytes reads as once each byte that is not part
// of valid UTF-8 is replaced by U+FFFD, as Go's string-to-rune conversion does.
func valid(b string) string { return string([]rune(b)) }

func createCast(t *testing.T, h recording.Header) (string, *recording.Writer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a", "b", "session.cast")
	w, err := recording.Create(path, h)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return path, w
}

func readCast(t *testing.T, path string) (recording.Header, []recording.Event) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, events, err := recording.Read(f)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return h, events
}

// joined concatenates the data of the events with code.
func joined(events []recording.Event, code string) string {
	var b strings.Builder
	for _, e := range events {
		if e.Code == code {
			b.WriteString(e.Data)
		}
	}
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	path, w := createCast(t, recording.Header{Width: 80, Height: 24, Title: `build "x" </script>`})
	for i, c := range chunks {
		w.Output([]byte(c))
		if i == 2 {
			w.Input([]byte("ls\r"))
			w.Resize(100, 40)
		}
	}
	w.Input([]byte("\xe2")) // an incomplete input character stays in the input stream
	w.Output([]byte("\x82\xac"))
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	w.Output([]byte("after close")) // ignored, no panic

	h, events := readCast(t, path)
	if h.Version != 2 || h.Width != 80 || h.Height != 24 || h.Title != `build "x" </script>` || h.Timestamp == 0 ||
		h.Env["TERM"] != "xterm-256color" || h.Env["SHELL"] != "/bin/bash" {
		t.Errorf("header = %+v", h)
	}
	out := strings.Join(chunks, "") + "\x82\xac"
	if got, want := joined(events, "o"), valid(out); got != want {
		t.Errorf("output\n got %q\nwant %q", got, want)
	}
	if got := joined(events, "o"); !strings.Contains(got, "café 😀 done") {
		t.Errorf("a character split across Output calls was not kept whole: %q", got)
	}
	if got := joined(events, "i"); got != "ls\r\ufffd" {
		t.Errorf("input = %q, want %q", got, "ls\r\ufffd")
	}
	if got := joined(events, "r"); got != "100x40" {
		t.Errorf("resizes = %q, want 100x40", got)
	}
	for i, e := range events {
		if i > 0 && e.Time < events[i-1].Time {
			t.Errorf("event %d at %v is before event %d at %v", i, e.Time, i-1, events[i-1].Time)
		}
	}
	checkFile(t, path)
}

// checkFile checks the modes asked of Create and that every line is valid
// UTF-8 and JSON on its own.
func checkFile(t *testing.T, path string) {
	t.Helper()
	for p, want := range map[string]fs.FileMode{path: 0o600, filepath.Dir(path): 0o700 | fs.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if !utf8.Valid(sc.Bytes()) || !json.Valid(sc.Bytes()) {
			t.Errorf("line %d is not UTF-8 JSON: %q", n, sc.Text())
		}
	}
}

func TestCreateKeepsExisting(t *testing.T) {
	path, w := createCast(t, recording.Header{Width: 80, Height: 24})
	w.Output([]byte("first"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := recording.Create(path, recording.Header{Width: 80, Height: 24}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over a recording: err = %v, want fs.ErrExist", err)
	}
	if _, events := readCast(t, path); joined(events, "o") != "first" {
		t.Errorf("the existing recording changed: %+v", events)
	}
}

func TestCreateRefusesNoSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.cast")
	if _, err := recording.Create(path, recording.Header{Width: 80}); !errors.Is(err, recording.ErrFormat) {
		t.Errorf("err = %v, want ErrFormat", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed Create left %s behind (%v)", path, err)
	}
}

func TestConcurrentCallers(t *testing.T) {
	path, w := createCast(t, recording.Header{Width: 80, Height: 24})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				switch g {
				case 0:
					w.Input([]byte("é"))
				case 1:
					w.Resize(80+i%3, 24)
				default:
					w.Output([]byte("é"[i%2:])) // half characters from two writers
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, events := readCast(t, path) // checks times never decrease
	if got := joined(events, "i"); got != strings.Repeat("é", 500) {
		t.Errorf("input = %q", got)
	}
	if n := len(events); n < 1000 {
		t.Errorf("%d events, want at least 1000", n)
	}
}

// FuzzOutput checks that however the output is cut into Output calls, the
// cast holds the same text as the whole stream would decode to.
func FuzzOutput(f *testing.F) {
	f.Add([]byte(strings.Join(chunks, "")), []byte{1, 2, 3, 4, 5})
	f.Add([]byte("\xf0\x9f\x98\x80\xf0\x9f\x98"), []byte{1, 1, 1, 1, 1, 1})
	f.Add([]byte("1\r\n2\r\r\n\n\r\"\\\u2028\r"), []byte{2, 3, 1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var file bytes.Buffer
		w, err := recording.NewTestWriter(&file, recording.Header{Width: 80, Height: 24}, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		rest := data
		for _, c := range cuts {
			n := min(int(c), len(rest))
			w.Output(rest[:n])
			rest = rest[n:]
		}
		w.Output(rest)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, events, err := recording.Read(&file)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if got, want := joined(events, "o"), valid(string(data)); got != want {
			t.Errorf("output %q, want %q", got, want)
		}
	})
}
