package redact_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// BenchmarkManyLiterals redacts 1 MiB of text that keeps starting like the
// values of a 1 MiB .env of 80,000 values sharing their first six bytes:
// the worst a workspace file could make of literal matching, which narrows
// by bytes rather than trying every value (before, about 200 s per MiB).
// Read it against BenchmarkRedactSeq.
func BenchmarkManyLiterals(b *testing.B) {
	root := b.TempDir()
	var env strings.Builder
	for i := 0; env.Len() < 1<<20-64; i++ {
		fmt.Fprintf(&env, "K%d=aaaaaa%06d\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(root, ".env"), []byte(env.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	r := newRedactor(b, redact.Config{SecretFiles: []string{".env"}}, redact.Options{Root: root})
	data := []byte(strings.Repeat("aaaaaaaaaaaaaaa\n", 1<<16) + "aaaaaa000042\n")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if out, n := r.Bytes(data); n.Total() != 1 || len(out) == len(data) {
			b.Fatalf("%d markers", n.Total())
		}
	}
}
