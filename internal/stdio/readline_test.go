package stdio

import (
	"bufio"
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestReadLineCopiesLittle: a long line (an upload's base64) is gathered
// piece by piece and joined once, so reading it allocates twice its size.
// append grows large slices by a quarter at a time, which allocated about
// five times the line, copied it as often, and was a quarter of tandem's
// CPU in an upload.
func TestReadLineCopiesLittle(t *testing.T) {
	const size = 32 << 20
	for _, tc := range []struct {
		name string
		line string
	}{
		{"long", strings.Repeat("a", size)},
		{"long with CR", strings.Repeat("b", size) + "\r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.line + "\n" + `{"jsonrpc":"2.0","method":"ping"}` + "\n"
			g := &Guard{in: bufio.NewReaderSize(strings.NewReader(in), 64<<10), maxLine: 2 * size}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			line, err := g.readLine()
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimRight(tc.line, "\r"); len(line) != len(want) || !bytes.Equal(line, []byte(want)) {
				t.Fatalf("got a line of %d bytes, want %d", len(line), len(want))
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 22*size/10 {
				t.Errorf("reading a %d-byte line allocated %d bytes (%.1fx), want at most 2.2x", size, got, float64(got)/size)
			}
			next, err := g.readLine()
			if err != nil || string(next) != `{"jsonrpc":"2.0","method":"ping"}` {
				t.Fatalf("the next line: %q, %v", next, err)
			}
		})
	}
}
