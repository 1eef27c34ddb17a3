package term_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/term"
)

var plainTests = []struct {
	name, in, want string
}{
	{"text", "hello, world\n", "hello, world\n"},
	{"colored ls",
		"\x1b[0m\x1b[01;34mbin\x1b[0m  \x1b[01;32mrun.sh\x1b[0m  notes.txt  \x1b[38;5;208mx\x1b[m\r\n",
		"bin  run.sh  notes.txt  x\n"},
	{"cursor movement", "\x1b[2J\x1b[H\x1b[1;1Hhi\x1b[K\x1b[?25l\x1b[3A\x1b[10C!\x1b[?25h", "hi!"},
	{"CRLF", "a\r\nb\r\n", "a\nb\n"},
	{"lone CR", "50%\r100%\r\n", "50%\r100%\n"},
	{"CR CR LF", "a\r\r\n", "a\r\n"},
	{"trailing CR", "a\r", "a\r"},
	{"CR then erase then LF", "a\r\x1b[K\n", "a\n"},
	{"title BEL", "\x1b]0;user@host: ~\atext", "text"},
	{"title ST", "\x1b]2;t\x1b\\text", "text"},
	{"hyperlink", "\x1b]8;;https://x.org\x1b\\link\x1b]8;;\x1b\\", "link"},
	{"mark", "\x1b]133;D;0;n=abc\a$ ", "$ "},
	{"DCS", "a\x1bP1$r0m\x1b\\b", "ab"},
	{"APC PM SOS", "a\x1b_apc\x1b\\b\x1b^pm\x1b\\c\x1bXsos\x1b\\d", "abcd"},
	{"DCS ignores BEL", "a\x1bPq\a#0\x1b\\b", "ab"},
	{"charset", "\x1b(Bx\x1b)0y\x1b%Gz", "xyz"},
	{"two-byte", "\x1b=\x1b>\x1b7a\x1b8\x1bM\x1bc", "a"},
	{"BEL dropped", "ding\a!", "ding!"},
	{"UTF-8", "héllo ✓ 日本 🙂", "héllo ✓ 日本 🙂"},
	{"C1 CSI not interpreted", "a\xc2\x9b31mb\x9b", "a\xc2\x9b31mb\x9b"},
	{"tabs and backspace", "a\tb\bc", "a\tb\bc"},
	{"ESC ends OSC", "\x1b]0;t\x1b[1mbold", "bold"},
	{"ESC restarts", "\x1b\x1b[31mx", "x"},
	{"CAN aborts CSI", "\x1b[31\x18x", "x"},
	{"SUB aborts OSC", "\x1b]0;t\x1ax", "x"},
	{"control inside CSI", "\x1b[3\n1mx", "\nx"},
	{"UTF-8 ends CSI", "\x1b[3é", "é"},
	{"DEL inside CSI", "\x1b[3\x7f1mx", "x"},
	{"unterminated", "x\x1b[", "x"},
}

func TestPlain(t *testing.T) {
	for _, tt := range plainTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := term.StripString(tt.in); got != tt.want {
				t.Errorf("StripString(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// Byte by byte gives the same.
			var sb strings.Builder
			pl := term.NewPlain(&sb)
			for i := range len(tt.in) {
				if n, err := pl.Write([]byte{tt.in[i]}); n != 1 || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := pl.Flush(); err != nil {
				t.Fatal(err)
			}
			if sb.String() != tt.want {
				t.Errorf("byte-wise: %q, want %q", sb.String(), tt.want)
			}
		})
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("broken")
}

func TestPlainWriteError(t *testing.T) {
	w := &failWriter{}
	pl := term.NewPlain(w)
	if _, err := pl.Write([]byte("\x1b[1m")); err != nil {
		t.Fatalf("Write with no text: %v", err)
	}
	if n, err := pl.Write([]byte("abc")); n != 0 || err == nil {
		t.Fatalf("Write = %d, %v; want 0, error", n, err)
	}
	if _, err := pl.Write([]byte("d")); err == nil {
		t.Error("error not sticky")
	}
	if err := pl.Flush(); err == nil {
		t.Error("Flush after error returned nil")
	}
	if w.n != 1 {
		t.Errorf("underlying Write called %d times, want 1", w.n)
	}
}
