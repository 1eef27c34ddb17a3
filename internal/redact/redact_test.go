package redact_test

import (
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/redact"
)

// Made-up secrets, one per built-in pattern.
const (
	awsKey    = "AKIAIOSFODNN7EXAMPLE"
	awsSTS    = "ASIAY34FZKBOKMUTVV7A"
	awsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	ghToken   = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
	glToken   = "glpat-AbCdEfGhIj_KlMnOp-QrSt"
	slackTok  = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	stripeKey = "sk_live_a1B2c3D4e5F6g7H8i9J0k1L2"
	jwt       = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	pemKey    = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aumhUV\nq2Xb3mWOHUJRbVnBd6zhw7H0/aTB2L9hp+C3Y7yd6Zg8\n-----END RSA PRIVATE KEY-----"
	sshPass   = "hunter2-correct"
)

// ghPAT is a fine-grained GitHub token: github_pat_ and 82 more bytes.
var ghPAT = "github_pat_" + strings.Repeat("A1b2_", 16) + "xy"

// newRedactor builds a Redactor or fails the test.
func newRedactor(t testing.TB, c redact.Config, o redact.Options) *redact.Redactor {
	t.Helper()
	r, err := redact.New(c, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// everything is a Redactor with every rule on: patterns, entropy and
// literals.
func everything(t testing.TB) *redact.Redactor {
	return newRedactor(t, redact.Config{Entropy: true}, redact.Options{Literals: []redact.Literal{
		{Value: sshPass, Kind: "ssh-password"},
		{Value: "sécret-mot", Kind: "ssh-password"},
		{Value: "abcdef"},
	}})
}

func TestPatterns(t *testing.T) {
	r := newRedactor(t, redact.Config{}, redact.Options{})
	tests := []struct {
		name, in, want string
	}{
		{"aws key", "AWS_ACCESS_KEY_ID=" + awsKey + "\n", "AWS_ACCESS_KEY_ID=[REDACTED:aws-key]\n"},
		{"aws sts key", "id " + awsSTS, "id [REDACTED:aws-key]"},
		{"aws key too long", "AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPLEX"},
		{"aws key inside a word", "x" + awsKey, "x" + awsKey},
		{"aws secret env", "AWS_SECRET_ACCESS_KEY=" + awsSecret, "AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret]"},
		{"aws secret ini", "aws_secret_access_key = " + awsSecret + "\n", "aws_secret_access_key = [REDACTED:aws-secret]\n"},
		{"aws secret json", `"aws_secret_access_key": "` + awsSecret + `"`, `"aws_secret_access_key": "[REDACTED:aws-secret]"`},
		{"aws secret too short", "aws_secret_access_key=short", "aws_secret_access_key=short"},
		{"github classic", "token " + ghToken + " ok", "token [REDACTED:github] ok"},
		{"github oauth", "gho_" + ghToken[4:], "[REDACTED:github]"},
		{"github fine-grained", "GH=" + ghPAT + "\n", "GH=[REDACTED:github]\n"},
		{"github too short", "ghp_abc123", "ghp_abc123"},
		{"gitlab", "glpat " + glToken, "glpat [REDACTED:gitlab]"},
		{"slack", "SLACK=" + slackTok, "SLACK=[REDACTED:slack]"},
		{"stripe live", stripeKey + ",", "[REDACTED:stripe],"},
		{"stripe test", "sk_test_" + stripeKey[8:], "[REDACTED:stripe]"},
		{"stripe restricted", "rk_live_" + stripeKey[8:], "[REDACTED:stripe]"},
		{"jwt", "Authorization: Bearer " + jwt + "\r\n", "Authorization: Bearer [REDACTED:jwt]\r\n"},
		{"jwt unsigned", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. x", "[REDACTED:jwt] x"},
		{"jwt one segment", "eyJhbGciOiJub25lIn0 x", "eyJhbGciOiJub25lIn0 x"},
		{"private key", "$ cat id_rsa\n" + pemKey + "\n$ ", "$ cat id_rsa\n[REDACTED:private-key]\n$ "},
		{"private key openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----", "[REDACTED:private-key]"},
		{"private key json escaped", `"private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"`, `"private_key": "[REDACTED:private-key]\n"`},
		{"private key unterminated", "-----BEGIN EC PRIVATE KEY-----\nMHcC", "[REDACTED:private-key]"},
		{"public key", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"},
		{"certificate", "-----BEGIN CERTIFICATE-----\nMIIB", "-----BEGIN CERTIFICATE-----\nMIIB"},
		{"url password", "postgres://app:Tr0ub4dor@db:5432/app", "postgres://app:[REDACTED:url-password]@db:5432/app"},
		{"url password empty user", "redis://:s3cr3tpw@cache:6379", "redis://:[REDACTED:url-password]@cache:6379"},
		{"url password with colon", "amqp://u:a:b@h", "amqp://u:[REDACTED:url-password]@h"},
		{"url port only", "http://localhost:8080/a@b", "http://localhost:8080/a@b"},
		{"url user only", "ssh://git@github.com:22/x", "ssh://git@github.com:22/x"},
		{"connection string", "Server=db;User Id=sa;Password=Secr3t!;", "Server=db;User Id=sa;Password=[REDACTED:password];"},
		{"query string", "/login?user=a&password=s3cret&x=1", "/login?user=a&password=[REDACTED:password]&x=1"},
		{"passwd", "passwd = hunter2 next", "passwd = [REDACTED:password] next"},
		{"pwd", "UID=sa;PWD=hunter2;", "UID=sa;PWD=[REDACTED:password];"},
		{"pwd is a directory", "PWD=/home/bob\nOLDPWD=~/src\n", "PWD=/home/bob\nOLDPWD=~/src\n"},
		{"password quoted", `DB_PASSWORD="pa ss"`, `DB_PASSWORD="[REDACTED:password] ss"`},
		{"password prompt", "Password: ", "Password: "},
		{"password empty", "password= ;", "password= ;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, counts := r.String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if n := strings.Count(tt.want, "[REDACTED:"); counts.Total() != n {
				t.Errorf("Total = %d, want %d (%v)", counts.Total(), n, counts)
			}
			if b, _ := r.Bytes([]byte(tt.in)); string(b) != got {
				t.Errorf("Bytes = %q, String = %q", b, got)
			}
		})
	}
}

func TestPatternsOff(t *testing.T) {
	off := false
	r := newRedactor(t, redact.Config{Patterns: &off}, redact.Options{})
	in := "key " + awsKey + " " + jwt + "\n" + pemKey
	if got, counts := r.String(in); got != in || counts != nil {
		t.Errorf("String = %q, %v; want the input unchanged", got, counts)
	}
}

func TestLiterals(t *testing.T) {
	r := newRedactor(t, redact.Config{}, redact.Options{Literals: []redact.Literal{
		{Value: sshPass, Kind: "ssh-password"},
		{Value: "abcdefghij"},
		{Value: "cdefgh"},
		{Value: "short"},              // under MinSecretLen: ignored
		{Value: "\xa9sécret-mot\xc3"}, // partial runes at the ends are trimmed
		{Value: "line one\nline two"},
		{Value: "it's-a-secret"},
	}})
	tests := []struct {
		name, in, want string
		counts         redact.Counts
	}{
		{"kind given", "pw " + sshPass + "\n", "pw [REDACTED:ssh-password]\n", redact.Counts{"ssh-password": 1}},
		{"kind default", "x abcdefghij y", "x [REDACTED:literal] y", redact.Counts{"literal": 1}},
		{"longest wins", "abcdefghij", "[REDACTED:literal]", redact.Counts{"literal": 1}},
		{"shorter alone", "xxcdefghxx", "xx[REDACTED:literal]xx", redact.Counts{"literal": 1}},
		{"adjacent stay apart", "cdefghcdefgh", "[REDACTED:literal][REDACTED:literal]", redact.Counts{"literal": 2}},
		{"short ignored", "a short word", "a short word", nil},
		{"trimmed", "«sécret-mot»", "«[REDACTED:literal]»", redact.Counts{"literal": 1}},
		{"case matters", "ABCDEFGHIJ", "ABCDEFGHIJ", nil},
		{"lines", "a line one\nline two b", "a [REDACTED:literal] b", redact.Counts{"literal": 1}},
		{"lines as a terminal prints them", "line one\r\nline two\r\n", "[REDACTED:literal]\r\n", redact.Counts{"literal": 1}},
		{"a quote", "x it's-a-secret y", "x [REDACTED:literal] y", redact.Counts{"literal": 1}},
		{"a quote as an argv shows it", `curl -H 'it'\''s-a-secret'`, `curl -H '[REDACTED:literal]'`, redact.Counts{"literal": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, counts := r.String(tt.in)
			if got != tt.want || !maps.Equal(counts, tt.counts) {
				t.Errorf("String(%q) = %q, %v; want %q, %v", tt.in, got, counts, tt.want, tt.counts)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	o := redact.Options{Environ: []string{"DB_PASS=old-value", "DB_PASS=correcthorse", "SHORT=abc", "OTHER=notasecret"}}
	r := newRedactor(t, redact.Config{Env: []string{"DB_PASS", "SHORT", "UNSET"}}, o)
	in := "correcthorse old-value abc notasecret"
	want := "[REDACTED:env] old-value abc notasecret"
	if got, counts := r.String(in); got != want || counts["env"] != 1 {
		t.Errorf("String = %q, %v; want %q", got, counts, want)
	}
	if _, err := redact.New(redact.Config{Env: []string{""}}, o); err == nil {
		t.Error("New accepted an empty env name")
	}
}

func TestOverlap(t *testing.T) {
	r := newRedactor(t, redact.Config{}, redact.Options{Literals: []redact.Literal{
		{Value: "7EXAMPLE and more", Kind: "a"},
		{Value: ghToken, Kind: "b"},
		{Value: "hunter2pw", Kind: "c"},
		{Value: "Tr0ub4dor@db", Kind: "d"},
		{Value: "more, more", Kind: "e"},
	}})
	tests := []struct {
		name, in, want string
		counts         redact.Counts
	}{
		{"pattern then literal", awsKey + " and more!", "[REDACTED:aws-key]!", redact.Counts{"aws-key": 1}},
		{"same span, literal first", ghToken, "[REDACTED:b]", redact.Counts{"b": 1}},
		{"value inside url", "mysql://u:hunter2pw@h", "mysql://u:[REDACTED:c]@h", redact.Counts{"c": 1}},
		{"longer literal names it", "postgres://app:Tr0ub4dor@db/x", "postgres://app:[REDACTED:d]/x", redact.Counts{"d": 1}},
		{"chain of overlaps", "pw " + awsKey + " and more, more.", "pw [REDACTED:aws-key].", redact.Counts{"aws-key": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, counts := r.String(tt.in)
			if got != tt.want || !maps.Equal(counts, tt.counts) {
				t.Errorf("String(%q) = %q, %v; want %q, %v", tt.in, got, counts, tt.want, tt.counts)
			}
		})
	}
}

func TestUTF8(t *testing.T) {
	r := everything(t)
	tests := []struct {
		name, in, want string
	}{
		{"runes around a token", "日本" + awsKey + "語", "日本[REDACTED:aws-key]語"},
		{"emoji around a jwt", "😀" + jwt + "😀", "😀[REDACTED:jwt]😀"},
		{"password value", "password=pässwörd;x", "password=[REDACTED:password];x"},
		{"url password", "https://ü:p😀ss@h", "https://ü:[REDACTED:url-password]@h"},
		{"literal", "«sécret-mot»", "«[REDACTED:ssh-password]»"},
		{"long value cut at a rune", "password=" + strings.Repeat("€", 100), "password=[REDACTED:password]" + strings.Repeat("€", 15)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := r.String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("String(%q) = %q: invalid UTF-8", tt.in, got)
			}
		})
	}
}

func TestEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) string {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	on := newRedactor(t, redact.Config{Entropy: true}, redact.Options{})
	off := newRedactor(t, redact.Config{}, redact.Options{})
	tok := random(32)
	tests := []struct {
		name, in string
		want     int // entropy markers with the rule on
	}{
		{"random token", "API_TOKEN=" + tok + "\n", 1},
		{"too short", "id " + tok[:20] + "\n", 0},
		{"git hash", "commit 3f9c2b1e8d7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e\n", 0},
		{"sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  -\n", 0},
		{"uuid", "id 123e4567-e89b-12d3-a456-426614174000\n", 0},
		{"words", "internationalization_and_localization_frameworks\n", 0},
		{"digits", "12345678901234567890123456789012\n", 0},
		{"long run in chunks", random(10000) + "\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, c := on.String(tt.in); c["entropy"] != tt.want {
				t.Errorf("entropy markers = %d, want %d (%v)", c["entropy"], tt.want, c)
			}
			if _, c := off.String(tt.in); c != nil {
				t.Errorf("with Entropy off, counts = %v", c)
			}
		})
	}
}

// seq returns the output of seq 1 n.
func seq(n int) []byte {
	var b []byte
	for i := 1; i <= n; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
	}
	return b
}

func TestNoFalsePositives(t *testing.T) {
	r := newRedactor(t, redact.Config{}, redact.Options{})
	tests := []struct{ name, in string }{
		{"seq", string(seq(100000))},
		{"env", "HOME=/home/bob\nPWD=/home/bob/src\nOLDPWD=/home/bob\nSHELL=/bin/bash\nLANG=en_US.UTF-8\n"},
		{"urls", "https://github.com/tandem-sh/tandem http://localhost:8080/x?a=b git@github.com:a/b.git\n"},
		{"git log", "commit 3f9c2b1e8d7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e\nAuthor: Bob <bob@example.com>\n"},
		{"prompts", "[sudo] password for bob: \nPassword:\nEnter passphrase for key '/home/bob/.ssh/id_ed25519': \n"},
		{"help text", "  -p, --password string   password to use\n  --pwd string   working directory\n"},
		{"go test", "=== RUN   TestX\n--- PASS: TestX (0.00s)\nok  \tgithub.com/tandem-sh/tandem/internal/jsonstr\t0.012s\n"},
		{"table", "+-----------+-------+\n| id        | name  |\n+-----------+-------+\n"},
	}
	for _, f := range []string{"gobuild.txt", "ls.txt", "gosum.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ name, in string }{f, string(b)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, counts := r.String(tt.in); got != tt.in {
				t.Errorf("redacted %v in ordinary output:\n%s", counts, firstDiff(got, tt.in))
			}
		})
	}
}

// firstDiff shows where got first differs from want.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	return "got  " + strconv.Quote(got[lo:min(len(got), i+60)]) + "\nwant " + strconv.Quote(want[lo:min(len(want), i+60)])
}

func TestCountsTotal(t *testing.T) {
	tests := []struct {
		c    redact.Counts
		want int
	}{
		{nil, 0},
		{redact.Counts{"a": 2}, 2},
		{redact.Counts{"a": 2, "b": 3}, 5},
	}
	for _, tt := range tests {
		if got := tt.c.Total(); got != tt.want {
			t.Errorf("%v.Total() = %d, want %d", tt.c, got, tt.want)
		}
	}
}
