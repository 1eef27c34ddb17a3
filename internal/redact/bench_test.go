package redact_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tandem-sh/tandem/internal/redact"
)

// BenchmarkRedactSeq redacts the output of seq 1 100000 with the default
// patterns; read it against BenchmarkBaselineCopy.
func BenchmarkRedactSeq(b *testing.B) {
	data := seq(100000)
	r := newRedactor(b, redact.Config{}, redact.Options{})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if out, _ := r.Bytes(data); len(out) != len(data) {
			b.Fatal("seq output was redacted")
		}
	}
}

// BenchmarkBaselineCopy copies the bytes BenchmarkRedactSeq redacts.
func BenchmarkBaselineCopy(b *testing.B) {
	data := seq(100000)
	dst := make([]byte, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		copy(dst, data)
	}
}

// BenchmarkStreamSeq streams the output of seq 1 100000 in PTY-sized
// reads.
func BenchmarkStreamSeq(b *testing.B) {
	benchStream(b, seq(100000), redact.Config{})
}

// BenchmarkStreamBuildLog streams a Go build log, text full of letters
// that begin prefixes, with every rule on.
func BenchmarkStreamBuildLog(b *testing.B) {
	log, err := os.ReadFile(filepath.Join("testdata", "gobuild.txt"))
	if err != nil {
		b.Fatal(err)
	}
	var data []byte
	for len(data) < 512<<10 {
		data = append(data, log...)
	}
	benchStream(b, data, redact.Config{Entropy: true})
}

func benchStream(b *testing.B, data []byte, c redact.Config) {
	r := newRedactor(b, c, redact.Options{Literals: []redact.Literal{{Value: sshPass}}})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s := r.Stream(io.Discard)
		for i := 0; i < len(data); i += 4096 {
			if _, err := s.Write(data[i:min(i+4096, len(data))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
