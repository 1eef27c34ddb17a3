package testenv

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// Browser starts a fresh headless Chromium for t and returns a chromedp
// context with one tab in it, ready for chromedp.Run. Each call is its own
// browser process with its own empty profile, so two calls are two
// independent viewers.
//
// Without Chromium the test is skipped, or fails when CI=true, so CI cannot
// pass by skipping. t.Cleanup stops the browser and fails the test if its
// process outlives the cleanup.
func Browser(t testing.TB) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		Missing(t, "testenv: %s: %v: install chromium (apt-get install chromium)", chromiumPath, err)
	}

	// No UserDataDir: chromedp then makes a fresh temporary profile per
	// browser, and on exit it kills Chromium's leftover helper processes
	// before removing that profile. With an explicit directory it does neither.
	// The flags below repeat some defaults on purpose: the tests rely on them.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	stop := func() {
		cancel()
		cancelAlloc() // waits for the process to exit and its profile to go
	}
	if err := chromedp.Do(ctx); err != nil { // starts the browser, bound to ctx
		stop()
		t.Fatalf("testenv: start chromium: %v", err)
	}
	proc := chromedp.FromContext(ctx).Browser.Process()
	t.Cleanup(func() {
		stop()
		// stop has reaped the process; a live pid means it escaped.
		if err := syscall.Kill(proc.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			proc.Kill()
			t.Errorf("testenv: chromium pid %d still running after cleanup", proc.Pid)
		}
	})
	return ctx
}
