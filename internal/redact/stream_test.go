package redact_test

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/redact"
)

// chunks records each Write it is given.
type chunks struct{ writes [][]byte }

func (c *chunks) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *chunks) String() string { return string(bytes.Join(c.writes, nil)) }

// stream writes pieces to a Stream of r, then flushes it.
func stream(t testing.TB, r *redact.Redactor, pieces ...string) (*chunks, redact.Counts) {
	t.Helper()
	var out chunks
	s := r.Stream(&out)
	for _, p := range pieces {
		if n, err := s.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return &out, s.Counts()
}

// streamInputs are texts with secrets in them, of every kind, next to each
// other and to multi-byte runes.
func streamInputs() []string {
	return []string{
		"key " + awsKey + "\n",
		"AWS_SECRET_ACCESS_KEY=" + awsSecret + "\n",
		"t=" + ghToken + " " + ghPAT + " " + glToken + " " + slackTok + " " + stripeKey,
		"Bearer " + jwt + "\r\n",
		"$ cat key\r\n" + pemKey + "\r\n$ ",
		"postgres://app:Tr0ub4dor@db:5432/app password=s3cr3t; pwd=/tmp PWD=x",
		"pw " + sshPass + "\r\n«sécret-mot»abcdef",
		"日本" + awsKey + "語😀" + jwt + "😀",
		"token Zx8kP2mQ9vR4tY7wL1nB6cD3fG5hJ0aS done",
		"AKIA no key here, eyJ not a jwt, -----BEGIN nothing, ://",
		"password=" + strings.Repeat("€", 100),
		awsKey,
		"",
	}
}

func TestStreamSplitAnywhere(t *testing.T) {
	r := everything(t)
	for _, in := range streamInputs() {
		want, wantCounts := r.String(in)
		for i := 0; i <= len(in); i++ {
			out, counts := stream(t, r, in[:i], in[i:])
			if out.String() != want || !maps.Equal(counts, wantCounts) {
				t.Errorf("split %q|%q:\n got %q %v\nwant %q %v", in[:i], in[i:], out, counts, want, wantCounts)
			}
			for _, w := range out.writes {
				if !utf8.Valid(w) {
					t.Errorf("split %q|%q: wrote invalid UTF-8 %q", in[:i], in[i:], w)
				}
			}
		}
	}
}

func TestStreamByteAtATime(t *testing.T) {
	r := everything(t)
	for _, in := range streamInputs() {
		want, _ := r.String(in)
		pieces := make([]string, len(in))
		for i := 0; i < len(in); i++ {
			pieces[i] = in[i : i+1]
		}
		out, _ := stream(t, r, pieces...)
		if out.String() != want {
			t.Errorf("bytes of %q:\n got %q\nwant %q", in, out, want)
		}
		for _, w := range out.writes {
			if !utf8.Valid(w) {
				t.Errorf("bytes of %q: wrote invalid UTF-8 %q", in, w)
			}
		}
	}
}

// TestStreamRandomPieces builds texts from fragments of secrets, of the
// prefixes and delimiters rules look for, and of multi-byte runes, and
// checks that streaming them in random pieces gives what String does.
// Random bytes (the fuzz target) seldom spell a prefix; these do.
func TestStreamRandomPieces(t *testing.T) {
	frags := []string{
		awsKey, awsKey[:7], awsSecret, "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", ghToken, ghToken[:20], ghPAT,
		glToken, slackTok, stripeKey, jwt, jwt[:30], "eyJ", ".", "-----BEGIN RSA PRIVATE KEY-----",
		"-----END RSA PRIVATE KEY-----", "-----", "://", ":", "@", "=", " = ", ";", "&", "'", `"`, "password", "PWD", "pwd=",
		"/", "~", sshPass, sshPass[:9], "sécret-mot", "sécret"[:2], "abcdef", "abc", "€", "😀", "é"[:1], "\n", "\r\n", " ",
		"Zx8kP2mQ9vR4tY7wL1nB6cD3fG5hJ0aS", "a1", "x", "Q", "0",
	}
	r := everything(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 3000; n++ {
		var b strings.Builder
		for range 1 + rng.IntN(25) {
			b.WriteString(frags[rng.IntN(len(frags))])
		}
		in := b.String()
		var pieces []string
		for rest := in; rest != ""; {
			k := min(len(rest), 1+rng.IntN(40))
			pieces, rest = append(pieces, rest[:k]), rest[k:]
		}
		want, wantCounts := r.String(in)
		out, counts := stream(t, r, pieces...)
		if out.String() != want || !maps.Equal(counts, wantCounts) {
			t.Fatalf("pieces %q:\n got %q %v\nwant %q %v", pieces, out, counts, want, wantCounts)
		}
	}
}

// TestStreamReleases checks what a Stream writes before Flush: text that
// cannot begin a secret goes out at once, so that a prompt is seen.
func TestStreamReleases(t *testing.T) {
	patterns := newRedactor(t, redact.Config{}, redact.Options{Literals: []redact.Literal{{Value: sshPass}}})
	entropy := newRedactor(t, redact.Config{Entropy: true}, redact.Options{})
	tests := []struct {
		name, in, want string
		r              *redact.Redactor
	}{
		{"shell prompt", "bob@host:~/src$ ", "bob@host:~/src$ ", patterns},
		{"sudo prompt", "[sudo] password for bob: ", "[sudo] password for bob: ", patterns},
		{"password prompt", "Password:", "Password:", patterns},
		{"question", "Continue? [y/N] ", "Continue? [y/N] ", patterns},
		{"word", "Enter name", "Enter name", patterns},
		{"token start", "key AKIA", "key ", patterns},
		{"whole token", "key " + awsKey, "key ", patterns},
		{"decided token", "key " + awsKey + "\n", "key [REDACTED:aws-key]\n", patterns},
		{"url before the password", "url https://bob:", "url https://bob:", patterns},
		{"url password", "url https://bob:pa", "url https://bob:", patterns},
		{"password value", "PASSWORD=hun", "PASSWORD=", patterns},
		{"jwt", "x eyJhbGci", "x ", patterns},
		{"private key", "ok\n" + pemKey[:40], "ok\n", patterns},
		{"literal start", "pw hunter", "pw ", patterns},
		{"half a rune", "naïve"[:3], "na", patterns},
		// Any word may go on to be a random token: with the entropy rule
		// on, a word at the end waits for the byte after it.
		{"entropy: prompt", "bob@host:~/src$ ", "bob@host:~/src$ ", entropy},
		{"entropy: word", "Enter name", "Enter ", entropy},
		{"entropy: random run", "t Zx8kP2", "t ", entropy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			s := tt.r.Stream(&out)
			if _, err := s.Write([]byte(tt.in)); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("before Flush: %q, want %q", out.String(), tt.want)
			}
			if held := len(tt.in) - len(tt.want); strings.HasPrefix(tt.in, tt.want) && s.Held() != held {
				t.Errorf("Held = %d, want %d", s.Held(), held)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if want, _ := tt.r.String(tt.in); out.String() != want {
				t.Errorf("after Flush: %q, want %q", out.String(), want)
			}
		})
	}
}

func TestStreamFlush(t *testing.T) {
	r := everything(t)
	tests := []struct {
		name         string
		first        string // written, then flushed
		afterWrite   string // output after writing first
		afterFlush   string // output after Flush
		second, want string // written after Flush, and the output once flushed again
	}{
		{"token at the end", "k " + awsKey, "k ", "k [REDACTED:aws-key]", "", "k [REDACTED:aws-key]"},
		{"short token", "k AKIAIOSFODNN7EXAMP", "k ", "k AKIAIOSFODNN7EXAMP", "", "k AKIAIOSFODNN7EXAMP"},
		{"unterminated key", "-----BEGIN PRIVATE KEY-----\nMII", "", "[REDACTED:private-key]", "", "[REDACTED:private-key]"},
		{"literal prefix", "hunter2-corr", "", "hunter2-corr", "", "hunter2-corr"},
		{"new stream after Flush", "AKIA", "", "AKIA", "IOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"},
		{"nothing held", "", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			s := r.Stream(&out)
			if _, err := s.Write([]byte(tt.first)); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.afterWrite {
				t.Errorf("after Write: %q, want %q", out.String(), tt.afterWrite)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.afterFlush || s.Held() != 0 {
				t.Errorf("after Flush: %q (%d held), want %q", out.String(), s.Held(), tt.afterFlush)
			}
			if _, err := s.Write([]byte(tt.second)); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("after the second Flush: %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// TestStreamBounded feeds text that keeps a rule undecided as long as it
// can, and checks that the Stream holds back no more than the rule's window.
func TestStreamBounded(t *testing.T) {
	r := everything(t)
	big := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0", 2000) // 72,000 token bytes
	tests := []struct {
		name, in string
		maxHeld  int
	}{
		{"private key without END", "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", 2000), 16 << 10},
		{"jwt-like run", "eyJ" + big, 4 << 10},
		{"token run", "ghp_" + big, 4 << 10},
		{"url user", "http://" + strings.Repeat(".", 70000), 0},
		{"dashes", strings.Repeat("-", 70000), 4 << 10}, // '-' makes random tokens too
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out chunks
			s := r.Stream(&out)
			held := 0
			for i := 0; i < len(tt.in); i += 1000 {
				if _, err := s.Write([]byte(tt.in[i:min(i+1000, len(tt.in))])); err != nil {
					t.Fatal(err)
				}
				held = max(held, s.Held())
			}
			if held > tt.maxHeld+1000 {
				t.Errorf("held %d bytes, want at most %d", held, tt.maxHeld+1000)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if want, _ := r.String(tt.in); out.String() != want {
				t.Errorf("stream output differs from String's")
			}
		})
	}
}

func TestStreamPrivateKeyBound(t *testing.T) {
	r := newRedactor(t, redact.Config{}, redact.Options{})
	body := strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", 1000) // 33,000 bytes
	in := "-----BEGIN PRIVATE KEY-----\n" + body + "-----END PRIVATE KEY-----\n"
	got, counts := r.String(in)
	if !strings.HasPrefix(got, "[REDACTED:private-key]") || counts["private-key"] != 1 {
		t.Fatalf("String = %.60q…, %v; want it to start with a marker", got, counts)
	}
	// The first 16 KiB go; the rest of the block is let through.
	if want := len(in) - 16<<10 + len("[REDACTED:private-key]"); len(got) != want {
		t.Errorf("len(String) = %d, want %d", len(got), want)
	}
	var out bytes.Buffer
	s := r.Stream(&out)
	if _, err := s.Write([]byte(in[:20<<10])); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "[REDACTED:private-key]") {
		t.Errorf("past the bound, nothing was written before Flush")
	}
}

var errBroken = errors.New("broken pipe")

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errBroken }

func TestStreamWriteError(t *testing.T) {
	s := everything(t).Stream(brokenWriter{})
	if _, err := s.Write([]byte("hello\n")); !errors.Is(err, errBroken) {
		t.Fatalf("Write = %v, want %v", err, errBroken)
	}
	if _, err := s.Write([]byte("more\n")); !errors.Is(err, errBroken) {
		t.Errorf("second Write = %v, want %v", err, errBroken)
	}
	if err := s.Flush(); !errors.Is(err, errBroken) {
		t.Errorf("Flush = %v, want %v", err, errBroken)
	}
}

func TestStreamCounts(t *testing.T) {
	r := everything(t)
	var out bytes.Buffer
	s := r.Stream(&out)
	for _, p := range []string{"a " + awsKey + "\n", "b " + jwt, "\n", sshPass} {
		if _, err := s.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	c := s.Counts()
	if want := (redact.Counts{"aws-key": 1, "jwt": 1}); !maps.Equal(c, want) {
		t.Errorf("Counts before Flush = %v, want %v", c, want)
	}
	c["aws-key"] = 100 // a copy: the stream's own stays
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := (redact.Counts{"aws-key": 1, "jwt": 1, "ssh-password": 1}); !maps.Equal(s.Counts(), want) {
		t.Errorf("Counts after Flush = %v, want %v", s.Counts(), want)
	}
}
