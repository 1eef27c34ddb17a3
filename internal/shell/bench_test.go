package shell_test

import (
	"context"
	"testing"

	"github.com/tandem-sh/tandem/internal/shell"
)

func benchShell(b *testing.B, cmd string, want int) {
	h := &harness{}
	sh, err := shell.Start(context.Background(), &ptyDialer{t: b}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sh.Close() })
	h.sh = sh
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec, err := sh.Exec(context.Background(), cmd, shell.ExecOptions{})
		if err != nil || rec.Stdout.Size() != int64(want) {
			b.Fatalf("%v: %d bytes", err, rec.Stdout.Size())
		}
	}
	b.SetBytes(int64(want))
}

func BenchmarkShellTrue(b *testing.B) { benchShell(b, "true", 0) }
func BenchmarkShellSeq(b *testing.B)  { benchShell(b, "seq 1 100000", 588895) }
