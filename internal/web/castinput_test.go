package web_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/web"
)

// writeTypedCast records a session in which a person typed a secret, with
// lines longer than any read buffer on both sides of the input, and a
// last line cut short.
func writeTypedCast(t *testing.T, secret string) (path string, withoutInput string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "typed.cast")
	w, err := recording.Create(path, recording.Header{Width: 80, Height: 24, Title: "typed"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 200<<10)
	w.Output([]byte("$ "))
	w.Input([]byte("mysql -p\r"))
	w.Output([]byte("Enter password: "))
	w.Input([]byte(secret + "\r"))
	w.Output([]byte(long))
	w.Input([]byte(long + secret))
	w.Resize(100, 30)
	w.Output([]byte("done\r\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, `[9.5, "i", "cut-short `+secret...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(line, `, "i", `) {
			kept = append(kept, line)
		}
	}
	return path, strings.Join(kept, "")
}

// TestCastInputOnlyForOperator: the recording's input events are served
// on the monitoring link only with the operator's sign-in (the dashboard's
// cookie, or its token as a bearer token); anyone else holding the link,
// the agent included, gets every other event, byte for byte, and no input.
func TestCastInputOnlyForOperator(t *testing.T) {
	const secret = "s3cret-typed-at-a-prompt"
	path, withoutInput := writeTypedCast(t, secret)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := recordings{testKey: {"typed", path}}
	withOperator := startCastServer(t, recs, &web.Operator{Token: operatorToken, Approvals: newBroker(), Sessions: newDirectory()})
	noOperator := startCastServer(t, recs, nil)

	for _, tc := range []struct {
		name   string
		base   string
		method string
		auth   func(*http.Request)
		input  bool
	}{
		{"watch link", withOperator, http.MethodGet, func(*http.Request) {}, false},
		{"wrong cookie", withOperator, http.MethodGet, func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken + "x"})
		}, false},
		{"wrong bearer", withOperator, http.MethodGet, func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, false},
		{"no operator configured", noOperator, http.MethodGet, func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken})
		}, false},
		{"operator cookie", withOperator, http.MethodGet, func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken})
		}, true},
		{"operator bearer", withOperator, http.MethodGet, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+operatorToken) }, true},
		{"HEAD", withOperator, http.MethodHead, func(*http.Request) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, web.MonitorURL(tc.base, testKey)+"/cast", nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.auth(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			checkHeaders(t, resp, "application/x-asciicast")
			got := body(t, resp)
			switch {
			case tc.method == http.MethodHead:
				if got != "" {
					t.Fatalf("HEAD sent a body of %d bytes", len(got))
				}
			case tc.input && got != string(full):
				t.Fatalf("the operator's cast differs from the file (%d bytes, want %d)", len(got), len(full))
			case !tc.input && got != withoutInput:
				t.Fatalf("the cast without input differs (%d bytes, want %d); has the secret: %v",
					len(got), len(withoutInput), strings.Contains(got, secret))
			}
		})
	}
	if _, events, err := recording.Read(strings.NewReader(withoutInput)); err != nil || len(events) == 0 {
		t.Errorf("the cast without input does not read back: %d events, %v", len(events), err)
	}
}

// startCastServer serves recs, with the dashboard of op (nil: none).
func startCastServer(t *testing.T, recs web.Recordings, op *web.Operator) string {
	t.Helper()
	log := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := web.Listen(ctx, "", &web.ListenOptions{Logger: log})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	srv := web.New(sessions{}, &web.Options{Logger: log, Recordings: recs, Operator: op})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
