package testenv_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

func TestBrowser(t *testing.T) {
	var pid int
	ok := t.Run("run", func(t *testing.T) {
		ctx := testenv.Browser(t)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1 + 2`))
		if err != nil || got != 3 {
			t.Fatalf("Evaluate(1 + 2) = %d, %v; want 3, nil", got, err)
		}
		pid = chromedp.FromContext(ctx).Browser.Process().Pid
	})
	if !ok {
		return
	}
	if pid == 0 {
		t.Skip("no browser started")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("chromium pid %d outlived its test: kill(pid, 0) = %v", pid, err)
	}
}
