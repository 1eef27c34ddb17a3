package web_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/web"
)

// scrollback is what every fake terminal has printed before a viewer joins.
const scrollback = "previous output\r\n"

// fakeTerm is an in-memory echo terminal: input comes back as output, and it
// records every input and resize.
type fakeTerm struct {
	name  string
	owner string

	mu       sync.Mutex
	out      []byte
	input    []byte
	sizes    [][2]int
	watchers int
	changed  chan struct{} // closed and replaced on every change
	broken   chan struct{} // closed and replaced by breakWatchers
	ended    chan struct{}
	endOnce  sync.Once
}

func newFakeTerm(name string) *fakeTerm {
	return &fakeTerm{
		name:    name,
		out:     []byte(scrollback),
		changed: make(chan struct{}),
		broken:  make(chan struct{}),
		ended:   make(chan struct{}),
	}
}

func (f *fakeTerm) Name() string { return f.name }

func (f *fakeTerm) Owner() string { return f.owner }

func (f *fakeTerm) Watch(ctx context.Context, fn func(p []byte) error) error {
	f.update(func() { f.watchers++ })
	defer f.update(func() { f.watchers-- })
	sent := 0
	for {
		f.mu.Lock()
		p, changed, broken := f.out[sent:], f.changed, f.broken
		sent = len(f.out)
		f.mu.Unlock()
		if len(p) > 0 {
			if err := fn(p); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.ended:
			return nil
		case <-broken:
			return errors.New("fake: watch broke")
		case <-changed:
		}
	}
}

func (f *fakeTerm) Input(_ context.Context, p []byte) error {
	f.update(func() {
		f.input = append(f.input, p...)
		f.out = append(f.out, p...)
	})
	return nil
}

func (f *fakeTerm) Resize(_ context.Context, cols, rows int) error {
	f.update(func() { f.sizes = append(f.sizes, [2]int{cols, rows}) })
	return nil
}

// emit prints s as if a program in the session wrote it.
func (f *fakeTerm) emit(s string) { f.update(func() { f.out = append(f.out, s...) }) }

// breakWatchers makes every current Watch fail, as a broken session would.
func (f *fakeTerm) breakWatchers() {
	f.update(func() {
		close(f.broken)
		f.broken = make(chan struct{})
	})
}

// end ends the session: every Watch returns.
func (f *fakeTerm) end() { f.endOnce.Do(func() { close(f.ended) }) }

func (f *fakeTerm) update(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
	close(f.changed)
	f.changed = make(chan struct{})
}

// snapshot returns the input and the resizes received so far.
func (f *fakeTerm) snapshot() (string, [][2]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.input), append([][2]int(nil), f.sizes...)
}

// waitFor waits until cond, called with the lock held, is true.
func (f *fakeTerm) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, changed := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			input, sizes := f.snapshot()
			t.Fatalf("timed out waiting for %s; input so far %q, sizes %v", what, input, sizes)
		}
	}
}

func (f *fakeTerm) waitInput(t *testing.T, want string) {
	t.Helper()
	f.waitFor(t, "input "+strings.ReplaceAll(want, "\x03", "^C"), func() bool {
		return bytes.Contains(f.input, []byte(want))
	})
}

// sessions is a fixed set of fake terminals by key.
type sessions map[string]*fakeTerm

func (s sessions) Terminal(key string) (web.Terminal, bool) {
	t, ok := s[key]
	return t, ok
}

// recordings is a fixed set of recordings of ended sessions by key.
type recordings map[string]recorded

type recorded struct{ name, path string }

func (r recordings) Recording(key string) (name, path string, ok bool) {
	rec, ok := r[key]
	return rec.name, rec.path, ok
}

// waitTimeout bounds every wait for the browser or the server. It is long
// because tests share slow machines; a passing test never waits it out.
const waitTimeout = 30 * time.Second

// testKey stands in for a real capability key.
const testKey = "k-7f3a9c2e51d04b8e96a1c0ffee12ab34"

// startServer serves s on a fresh loopback port until the test ends, and
// returns the base URL.
func startServer(t *testing.T, s web.Sessions) string {
	t.Helper()
	return startReplayServer(t, s, nil)
}

// startReplayServer is startServer with recordings of ended sessions.
func startReplayServer(t *testing.T, s web.Sessions, r web.Recordings) string {
	t.Helper()
	base, stop := startStoppable(t, s, r)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return base
}

// startStoppable serves s and the recordings r (nil for none), and returns
// the base URL and a func that stops the server and returns what Serve returned.
func startStoppable(t *testing.T, s web.Sessions, r web.Recordings, public ...string) (string, func() error) {
	t.Helper()
	log := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := web.Listen(ctx, "", &web.ListenOptions{Logger: log})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	srv := web.New(s, &web.Options{Logger: log, Recordings: r, PublicHosts: public})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() error {
		cancel()
		return <-served
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
