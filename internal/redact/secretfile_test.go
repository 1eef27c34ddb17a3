package redact_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/redact"
)

func TestParseSecretFile(t *testing.T) {
	tests := []struct {
		name, file, data string
		want             []string // sorted
		wantLine         int      // the line an error names; 0: no error
	}{
		{
			name: "dotenv", file: ".env",
			data: "# comment\n\nA=abcdefgh\nexport B='single q'\nC=\"dbl \\\"q\\\" \\n x\"\nD = plain value # trailing\nE=\n",
			want: []string{"", "abcdefgh", "dbl \"q\" \n x", "plain value", "single q"},
		},
		{
			name: "dotenv crlf", file: "app.env",
			data: "TOKEN=abcdefgh\r\nOTHER=\"quoted\"\r\n",
			want: []string{"abcdefgh", "quoted"},
		},
		{
			name: "dotenv multi-line value", file: ".env",
			data: "KEY=\"-----BEGIN\nabc\n-----END\"\nX=y\n",
			want: []string{"-----BEGIN\nabc\n-----END", "y"},
		},
		{
			name: "dotenv hash inside a value", file: ".env",
			data: "URL=http://h/#frag\nP='a #b'\n",
			want: []string{"a #b", "http://h/#frag"},
		},
		{name: "token file", file: "token", data: "ghp_abcdef123456\n", want: []string{"ghp_abcdef123456"}},
		{name: "base64 token file", file: "token", data: "dGVzdHRva2VuMTI=\n", want: []string{"dGVzdHRva2VuMTI="}},
		{name: "empty file", file: ".env", data: "", want: nil},
		{name: "dotenv bad line", file: ".env", data: "A=1\nnot an assignment\nB=2\n", wantLine: 2},
		{name: "dotenv bad key", file: ".env", data: "A=1\n1B=2\n", wantLine: 2},
		{name: "dotenv unclosed quote", file: ".env", data: "A=1\nB=\"never closed\nC=3\n", wantLine: 2},
		{
			name: "aws credentials", file: "credentials",
			data: "[default]\naws_access_key_id = " + awsKey + "\naws_secret_access_key = " + awsSecret + "\n\n; comment\n[prod]\nregion: eu-west-1\n",
			want: []string{awsKey, "eu-west-1", awsSecret},
		},
		{
			name: "ini continuation", file: "app.ini",
			data: "[s]\nkey = \"quoted value\"\nmulti =\n  first line\n  second line\n",
			want: []string{"", "first line", "quoted value", "second line"},
		},
		{
			name: "kube config", file: "config",
			data: "apiVersion: v1\nusers:\n- name: admin\n  user:\n    token: abcdef123456\n",
			want: []string{"", "", "abcdef123456", "admin", "v1"},
		},
		{name: "ini bad section", file: "x.cfg", data: "[s\nk=v\n", wantLine: 1},
		{name: "ini bad line", file: "x.ini", data: "[s]\nk=v\njunk\n", wantLine: 3},
		{
			name: "json", file: "sa.json",
			data: `{"a":"x1","b":{"c":["y2",1,true,null,"z3"]},"n":{"k":""}}`,
			want: []string{"", "x1", "y2", "z3"},
		},
		{name: "json content, other name", file: "token.txt", data: `  {"token": "abcdef123"}` + "\n", want: []string{"abcdef123"}},
		{name: "json array", file: "secrets", data: `["abcdefgh", {"k": "ijklmnop"}]`, want: []string{"abcdefgh", "ijklmnop"}},
		{name: "json invalid", file: "sa.json", data: `{"a": `, wantLine: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := redact.ParseSecretFile(tt.file, []byte(tt.data))
			if tt.wantLine != 0 {
				var fe *redact.FileError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v (%T), want a *FileError", err, err)
				}
				if fe.Path != tt.file || (tt.wantLine > 0 && fe.Line != tt.wantLine) {
					t.Errorf("err = %v, want it to name %s line %d", err, tt.file, tt.wantLine)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("values = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewSecretFiles(t *testing.T) {
	home := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(".aws/credentials", "[default]\naws_secret_access_key = averysecretvalue\nregion = us\n")
	write("app/.env", "DB_PASSWORD=tops3cret\nPORT=8080\n")
	write("sa.json", `{"private_key_id": "0123456789abcdef", "type": "service_account"}`)
	abs := filepath.Join(home, "app/.env")

	r := newRedactor(t, redact.Config{SecretFiles: []string{"~/.aws/credentials", abs, "~/sa.json"}}, redact.Options{Home: home})
	in := "averysecretvalue us tops3cret 8080 0123456789abcdef service_account"
	want := "[REDACTED:file] us [REDACTED:file] 8080 [REDACTED:file] [REDACTED:file]"
	if got, counts := r.String(in); got != want || counts["file"] != 4 {
		t.Errorf("String = %q, %v; want %q", got, counts, want)
	}

	tests := []struct {
		name string
		path string
		home string
		want []string // in the message
		is   error
	}{
		{"missing", "~/.config/none.env", home, []string{"~/.config/none.env", "no such file", "secretFiles"}, fs.ErrNotExist},
		{"no home", "~/.env", "", []string{"~/.env", "Options.Home"}, nil},
		{"other user", "~bob/.env", home, []string{"~bob/.env", "~user"}, nil},
		{"bad content", "~/bad.env", home, []string{"~/bad.env", "line 2", "KEY=value"}, nil},
	}
	write("bad.env", "A=1\nnot dotenv\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redact.New(redact.Config{SecretFiles: []string{tt.path}}, redact.Options{Home: tt.home})
			var fe *redact.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to say %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
		})
	}
}

// TestSecretFileNotRegular: a secret file someone else may replace (a
// project's .env) as a FIFO, a device or a huge file is refused at once,
// and never blocks or fills memory.
func TestSecretFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.env")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "zero.env")
	if err := os.Symlink("/dev/zero", dev); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.env")
	if err := os.WriteFile(big, bytes.Repeat([]byte("A=0123456789\n"), redact.MaxSecretFileBytes/10), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{dev, "not a regular file"},
		{big, "larger than"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			_, err := redact.New(redact.Config{SecretFiles: []string{tc.path}}, redact.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestSecretFileBeneathRoot: with Options.Root (a workspace the agent may
// write), a relative secret file is read only within it: a symlink out of
// it, a symlinked directory and ".." are refused without reading anything
// outside, and a file the workspace lacks is no secrets.
func TestSecretFileBeneathRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.env")
	if err := os.WriteFile(secret, []byte("TOKEN=outside-value-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".env"), []byte("TOKEN=inside-value-456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, err, redacted string
	}{
		{".env", "", "inside-value-456"},
		{"absent.env", "", ""},
		{"link.env", "leads out of", ""},
		{"sub/secret.env", "leads out of", ""},
		{"../" + filepath.Base(outside) + "/secret.env", "leads out of", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := redact.New(redact.Config{SecretFiles: []string{tc.file}}, redact.Options{Root: root})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "outside-value") {
					t.Fatalf("New = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.redacted != "" {
				if got, _ := r.String("v=" + tc.redacted); got != "v=[REDACTED:file]" {
					t.Errorf("String = %q", got)
				}
			}
		})
	}
}

// TestRefresh: a secret file written, changed or moved after the Redactor
// was built counts once Refresh runs, in String and in a Stream made
// before; a value the file no longer holds stays a secret; a file that
// turns unusable keeps the values read before, and its error is reported
// once; an unchanged file is not read again.
func TestRefresh(t *testing.T) {
	root := t.TempDir()
	env := filepath.Join(root, ".env")
	r, err := redact.New(redact.Config{SecretFiles: []string{".env"}}, redact.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	hidden := func(s string) bool {
		t.Helper()
		out, _ := r.String("x " + s + " y")
		return !strings.Contains(out, s)
	}
	write := func(data string) {
		t.Helper()
		// A new file each time: a new inode, as an editor writes it.
		tmp := env + ".tmp"
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, env); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Refresh(); err != nil || hidden("first-secret-1") {
		t.Fatalf("before the file exists: %v, hidden %v", err, hidden("first-secret-1"))
	}
	var got bytes.Buffer
	st := r.Stream(&got)
	write("TOKEN=first-secret-1\n")
	if err := r.Refresh(); err != nil || !hidden("first-secret-1") {
		t.Fatalf("a .env written later is not taken: %v", err)
	}
	if _, err := st.Write([]byte("then first-secret-1 leaked\n")); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.String(), "first-secret-1") {
		t.Errorf("a stream made before the refresh let the new secret through: %q", got.String())
	}
	write("TOKEN=second-secret-2\n")
	if err := r.Refresh(); err != nil || !hidden("second-secret-2") || !hidden("first-secret-1") {
		t.Fatalf("after a change: %v; new hidden %v, old hidden %v", err, hidden("second-secret-2"), hidden("first-secret-1"))
	}
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(env, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO in its place: %v", err)
	}
	if err := r.Refresh(); err != nil {
		t.Errorf("the same error reported twice: %v", err)
	}
	if !hidden("second-secret-2") || !hidden("first-secret-1") {
		t.Error("an unusable file dropped the values read before")
	}
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", env); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(); err == nil || !strings.Contains(err.Error(), "leads out of") {
		t.Fatalf("a symlink out: %v", err)
	}
	if hidden("root:x:0:0") {
		t.Error("a symlink out of the root was read")
	}
}

// TestRefreshBounded: a file rewritten again and again keeps at most
// maxBefore earlier values, the newest ones.
func TestRefreshBounded(t *testing.T) {
	root := t.TempDir()
	env := filepath.Join(root, ".env")
	r, err := redact.New(redact.Config{SecretFiles: []string{".env"}}, redact.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	const rounds, per = 50, 100 // 5,000 values in all
	value := func(round, k int) string { return "value-" + itoa(round) + "-" + itoa(k) + "-xyz" }
	for i := range rounds {
		var b strings.Builder
		for k := range per {
			b.WriteString("K" + itoa(k) + "=" + value(i, k) + "\n")
		}
		if err := os.WriteFile(env, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		// Two writes in one clock tick may leave size and inode alike:
		// set the time apart to be sure.
		at := time.Unix(int64(1_000_000+i), 0)
		if err := os.Chtimes(env, at, at); err != nil {
			t.Fatal(err)
		}
		if err := r.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if n := redact.KeptBefore(r); n > redact.MaxBefore || n < redact.MaxBefore-per {
		t.Errorf("%d earlier values kept, want about %d", n, redact.MaxBefore)
	}
	for _, v := range []string{value(rounds-1, 7), value(rounds-2, 7)} {
		if out, _ := r.String(v); !strings.HasPrefix(out, "[REDACTED") {
			t.Errorf("a recent value is not hidden: %q", out)
		}
	}
	if out, _ := r.String(value(0, 7)); out != value(0, 7) {
		t.Errorf("the oldest value was kept past the bound: %q", out)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestSecretFileInBase: with Options.Base (an ssh target's config
// directory) a relative secret file that is missing holds no secrets, as
// in a workspace, and counts once it appears; an absolute one that is
// missing is still an error that names it, and a relative one that
// exists but cannot be parsed names where tandem looked.
func TestSecretFileInBase(t *testing.T) {
	base := t.TempDir()
	abs := filepath.Join(base, "prod.env")
	tests := []struct {
		name    string
		files   []string
		wantErr string // "" when New succeeds
	}{
		{"relative missing", []string{".env"}, ""},
		{"absolute missing", []string{abs}, abs},
		{"relative and absolute missing", []string{".env", abs}, abs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redact.New(redact.Config{SecretFiles: tc.files}, redact.Options{Base: base})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("New(%q) = %v, want error %q", tc.files, err, tc.wantErr)
			}
		})
	}

	r, err := redact.New(redact.Config{SecretFiles: []string{".env"}}, redact.Options{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, ".env"), []byte("TOKEN=written-later-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(); err != nil {
		t.Fatal(err)
	}
	if out, _ := r.String("x written-later-42 y"); strings.Contains(out, "written-later-42") {
		t.Errorf("a .env created beside the config later is not taken: %q", out)
	}
	if err := os.WriteFile(filepath.Join(base, ".env"), []byte("OK=1\nnot a dotenv line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = redact.New(redact.Config{SecretFiles: []string{".env"}}, redact.Options{Base: base})
	if want := filepath.Join(base, ".env") + ": line 2"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a broken .env beside the config: %v, want it to say %q", err, want)
	}
}
