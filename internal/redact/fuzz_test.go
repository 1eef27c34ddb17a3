package redact_test

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/redact"
)

// FuzzStreamEqualsString checks that streaming a text in three pieces
// writes what redacting it whole returns, and that every write is valid
// UTF-8 when the text is.
func FuzzStreamEqualsString(f *testing.F) {
	for _, in := range streamInputs() {
		f.Add([]byte(in), uint16(len(in)/2), uint16(len(in)/3))
	}
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----"), uint16(30), uint16(5))
	f.Add([]byte("a://b:c@d password = 'x' aws_secret_access_key:\"wJalrXUtnFEMI/K7MDENG/bP\""), uint16(9), uint16(40))
	r := everything(f)
	f.Fuzz(func(t *testing.T, in []byte, a, b uint16) {
		i := int(a) % (len(in) + 1)
		j := i + int(b)%(len(in)-i+1)
		want, wantCounts := r.Bytes(bytes.Clone(in))
		var out chunks
		s := r.Stream(&out)
		for _, p := range [][]byte{in[:i], in[i:j], in[j:]} {
			if _, err := s.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != string(want) {
			t.Fatalf("split %q|%q|%q:\n stream %q\n string %q", in[:i], in[i:j], in[j:], got, want)
		}
		if got := s.Counts(); got.Total() != wantCounts.Total() {
			t.Fatalf("stream counts %v, string counts %v", got, wantCounts)
		}
		if utf8.Valid(in) {
			if !utf8.Valid(want) {
				t.Fatalf("valid input %q redacted to invalid UTF-8 %q", in, want)
			}
			for _, w := range out.writes {
				if !utf8.Valid(w) {
					t.Fatalf("valid input %q: stream wrote invalid UTF-8 %q", in, w)
				}
			}
		}
	})
}

// FuzzParseSecretFile checks that no file content makes the parser panic,
// and that its errors name the file.
func FuzzParseSecretFile(f *testing.F) {
	f.Add("x.env", []byte("A=abcdefgh\nexport B='x'\nC=\"multi\nline\"\n"))
	f.Add("credentials", []byte("[default]\naws_secret_access_key = abc\n  cont\n"))
	f.Add("sa.json", []byte(`{"a":["b",{"c":"d"}]}`))
	f.Add("token", []byte("c2VjcmV0IQ==\n"))
	f.Add("config", []byte("[broken\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		_, err := redact.ParseSecretFile(name, data)
		var fe *redact.FileError
		if err != nil && (!errors.As(err, &fe) || fe.Path != name) {
			t.Fatalf("err = %v (%T), want a *FileError naming %q", err, err, name)
		}
	})
}
