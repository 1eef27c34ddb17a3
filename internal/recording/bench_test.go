package recording_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/recording"
)

// benchChunk is one PTY read of busy output: mostly ASCII, some escapes and
// multi-byte characters.
var benchChunk = bytes.Repeat([]byte("\x1b[32mok\x1b[0m  build/étape-2/file_0042.go \"x\"\r\n"), 32<<10/48)

// BenchmarkOutput measures what Output costs its caller, who holds the
// terminal engine's lock, and how fast the file grows, unpaced.
func BenchmarkOutput(b *testing.B) { benchOutput(b, benchChunk) }

// benchOutput records chunk over and over into a new file.
func benchOutput(b *testing.B, chunk []byte) {
	w, err := recording.Create(filepath.Join(b.TempDir(), "bench.cast"), recording.Header{Width: 80, Height: 24})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		w.Output(chunk)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(w.Lost()), "lost-bytes")
}

// BenchmarkOutput100MBps feeds output at 100 MB/s, a fast build log flooding
// the terminal, and fails if the writer drops any of it.
func BenchmarkOutput100MBps(b *testing.B) {
	const rate = 100e6 // bytes per second
	w, err := recording.Create(filepath.Join(b.TempDir(), "bench.cast"), recording.Header{Width: 80, Height: 24})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchChunk)))
	start, sent := time.Now(), 0
	for b.Loop() {
		w.Output(benchChunk)
		sent += len(benchChunk)
		if ahead := time.Duration(float64(sent)/rate*float64(time.Second)) - time.Since(start); ahead > time.Millisecond {
			time.Sleep(ahead)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if lost := w.Lost(); lost > 0 {
		b.Errorf("lost %d of %d bytes at 100 MB/s", lost, sent)
	}
}

// BenchmarkOutputShortLines is BenchmarkOutput for what `seq` prints:
// short lines, so an escape every few bytes.
func BenchmarkOutputShortLines(b *testing.B) {
	var chunk []byte
	for i := 100000; len(chunk) < 64<<10; i++ {
		chunk = append(chunk, fmt.Sprintf("%d\r\n", i)...)
	}
	benchOutput(b, chunk)
}
