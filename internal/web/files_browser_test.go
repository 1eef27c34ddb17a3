package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// dropFile drops a file named name holding text on the page's terminal,
// as a person dragging it from their desktop does: a DataTransfer with
// the file, dragged over and dropped.
func dropFile(name, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(function () {
		const dt = new DataTransfer();
		dt.items.add(new File([` + strconv.Quote(text) + `], ` + strconv.Quote(name) + `));
		const el = document.getElementById('terminal');
		for (const type of ['dragenter', 'dragover', 'drop']) {
			el.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
		}
	})()`)
}

// filesSays waits until the page's files line includes s.
func filesSays(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	poll(t, ctx, `(document.getElementById('files-message') || {}).textContent.includes(`+strconv.Quote(s)+`)`)
}

// TestBrowserFiles: the signed-in operator drops a file on the page and
// picks one in the file input; both land in the workspace byte for byte
// and the page says so with the hash. A refused path shows the server's
// sentence. A path typed in the download box comes down as a file. A
// viewer with the watch link alone is offered none of it.
func TestBrowserFiles(t *testing.T) {
	term := newFileTerm(t, 1<<20)
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), terms{testKey: term})
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(web.DashboardURL(base, operatorToken))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `window.tandem && window.tandem.status() === "live"`)

	if err := chromedp.Do(ctx, dropFile("dropped.txt", "dropped by a human\n")); err != nil {
		t.Fatal(err)
	}
	filesSays(t, ctx, "Uploaded dropped.txt (19 bytes, sha256 ")
	if b, err := os.ReadFile(filepath.Join(term.dir, "dropped.txt")); err != nil || string(b) != "dropped by a human\n" {
		t.Errorf("dropped file: %q %v", b, err)
	}

	picked := filepath.Join(t.TempDir(), "picked.bin")
	want := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	if err := os.WriteFile(picked, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS(`#upload-input`), []string{picked})); err != nil {
		t.Fatal(err)
	}
	filesSays(t, ctx, "Uploaded picked.bin (7 bytes")
	if b, _ := os.ReadFile(filepath.Join(term.dir, "picked.bin")); string(b) != string(want) {
		t.Errorf("picked file: %q", b)
	}

	// Into a folder the rule denies: the page shows the rule's sentence.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#upload-dir`), "secret"), dropFile("k", "x")); err != nil {
		t.Fatal(err)
	}
	filesSays(t, ctx, `Upload of secret/k refused: the policy rule "no secrets" denies secret/k`)

	// Download by path: the browser saves the file.
	saved := t.TempDir()
	// The events end with their context: a download that never completes
	// fails the test instead of hanging it.
	evctx, stopEvents := context.WithTimeout(ctx, 30*time.Second)
	defer stopEvents()
	progress := chromedp.Events(evctx, browser.DownloadProgress)
	events := true
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: saved, EventsEnabled: &events,
		})
		return err
	}), chromedp.SetValue(chromedp.CSS(`#download-path`), "picked.bin"), chromedp.Click(chromedp.CSS(`#download`))); err != nil {
		t.Fatal(err)
	}
	filesSays(t, ctx, "Downloaded picked.bin (7 bytes)")
	completed := false
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download: %v", err)
		}
		if ev.State != browser.DownloadProgressStateCompleted {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(saved, ev.GUID)); err != nil || string(b) != string(want) {
			t.Errorf("the saved download: %q %v", b, err)
		}
		completed = true
		break
	}
	if !completed {
		t.Fatal("the browser never finished the download")
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#download-path`), "nope"), chromedp.Click(chromedp.CSS(`#download`))); err != nil {
		t.Fatal(err)
	}
	filesSays(t, ctx, "Download of nope refused: there is no file at this path")

	// The watch link alone: no upload or download on the page, and a drop
	// does nothing.
	watcher := testenv.Browser(t)
	if err := chromedp.Do(watcher, chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
		t.Fatal(err)
	}
	poll(t, watcher, `window.tandem && window.tandem.status() === "live"`)
	var affordances int
	if err := chromedp.Do(watcher, dropFile("watcher.txt", "x"),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) (err error) {
			affordances, err = chromedp.Evaluate[int](`document.querySelectorAll('#files, #upload-input, #download, input[type=file]').length`)(ctx, t)
			return err
		})); err != nil {
		t.Fatal(err)
	}
	if affordances != 0 {
		t.Errorf("the watch link's page offers %d file controls", affordances)
	}
	if _, err := os.Stat(filepath.Join(term.dir, "watcher.txt")); err == nil {
		t.Errorf("a watcher's drop wrote a file")
	}
}
