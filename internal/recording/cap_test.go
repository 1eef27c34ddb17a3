package recording_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/recording"
)

// TestCap: past its cap a recording keeps no more output or input, says
// so once in the cast, counts what it dropped, and still records markers
// and resizes; a program printing control bytes (six bytes each in the
// cast) is held to the same bound on disk.
func TestCap(t *testing.T) {
	tests := []struct {
		name  string
		cap   int64
		chunk string
		n     int
	}{
		{"no cap", 0, strings.Repeat("y", 1000), 100},
		{"text past the cap", 20_000, strings.Repeat("y", 1000), 1000},
		{"control bytes past the cap", 20_000, strings.Repeat("\x01", 1000), 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.cast")
			w, err := recording.Create(path, recording.Header{Width: 80, Height: 24})
			if err != nil {
				t.Fatal(err)
			}
			w.Cap(tc.cap)
			for range tc.n {
				w.Output([]byte(tc.chunk))
			}
			w.Input([]byte("typed"))
			w.Marker("end agent: 0")
			w.Resize(100, 40)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, events, err := recording.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			kept, notices, marker, resize := 0, 0, false, false
			for _, e := range events {
				switch {
				case e.Code == "o" && strings.Contains(e.Data, "recording keeps no more output"):
					notices++
				case e.Code == "o" || e.Code == "i":
					kept += len(e.Data)
				case e.Code == "m":
					marker = true
				case e.Code == "r":
					resize = true
				}
			}
			sent := int64(tc.n * len(tc.chunk))
			if !marker || !resize {
				t.Errorf("marker %v, resize %v", marker, resize)
			}
			if tc.cap == 0 {
				if int64(kept) != sent+int64(len("typed")) || notices != 0 || w.Lost() != 0 {
					t.Errorf("kept %d of %d, %d notices, lost %d", kept, sent, notices, w.Lost())
				}
				return
			}
			if notices != 1 || fi.Size() > tc.cap+4096 || w.Lost() != sent+int64(len("typed"))-int64(kept) {
				t.Errorf("%d notices, a cast of %d bytes for a cap of %d, lost %d of %d (kept %d)", notices, fi.Size(), tc.cap, w.Lost(), sent, kept)
			}
		})
	}
}
