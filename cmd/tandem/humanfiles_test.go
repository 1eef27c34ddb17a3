package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// humanFilesPolicy denies every file transfer under a secret/, the agent's
// and the human's alike, and allows the rest; an upload holds at most 1 MiB.
const humanFilesPolicy = `targets:
  - {name: dev, kind: local, workspace: ws}
limits: {uploadBytes: 1048576}
policy:
  mode: allow
  rules:
    - {path: "**/secret/**", decision: deny}
`

// dropBytes drops a file of n bytes, byte i being (i*7+3)&255, named name,
// on the monitoring page's terminal: a DataTransfer with the file, dragged
// over and dropped, as a person dragging it from their desktop does.
func dropBytes(name string, n int) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(function () {
		const b = new Uint8Array(` + strconv.Itoa(n) + `);
		for (let i = 0; i < b.length; i++) { b[i] = (i * 7 + 3) & 255; }
		const dt = new DataTransfer();
		dt.items.add(new File([b], ` + strconv.Quote(name) + `));
		const el = document.getElementById('terminal');
		for (const type of ['dragenter', 'dragover', 'drop']) {
			el.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
		}
	})()`)
}

// droppedBytes are the bytes dropBytes drops.
func droppedBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*7 + 3) & 255)
	}
	return b
}

// filesMessage waits until the page's files line includes want, and
// returns it.
func filesMessage(t *testing.T, ctx context.Context, want string) string {
	t.Helper()
	js := `(document.getElementById('files-message') || {}).textContent || ""`
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if got, err = chromedp.Run(ctx, chromedp.Evaluate[string](js)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, want) {
			return got
		}
	}
	t.Fatalf("the page's files line reads %q, want %q in it", got, want)
	return ""
}

// userFiles is the userFiles of r, each checked to be told with its hint.
func userFiles(t *testing.T, r map[string]any) []map[string]any {
	t.Helper()
	list, _ := r["userFiles"].([]any)
	if len(list) > 0 && str(r["userFilesHint"]) == "" {
		t.Errorf("userFiles without its hint: %v", r)
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		out = append(out, e.(map[string]any))
	}
	return out
}

// TestHumanFilesReachAgent: the operator drops a file on the monitoring
// page in Chromium, locally and over SSH; it lands in the workspace byte
// for byte, and the agent's next call reports it with its SHA-256, once.
// The operator downloads it back by path, and the agent hears of that too.
// A path out of the workspace and one a policy rule denies are refused
// with the reason on the page, and nothing is written or told. The watch
// link alone may neither upload nor download and is offered neither; an
// upload from another origin is refused. Every transfer is audited with
// path, size and hash, never the content.
func TestHumanFilesReachAgent(t *testing.T) {
	for _, tg := range []storyTarget{
		{"local", func(t *testing.T) (*tandemProc, map[string]any) {
			return startServer(t, serverOpts{config: humanFilesPolicy}), map[string]any{"target": "dev"}
		}},
		{"ssh", func(t *testing.T) (*tandemProc, map[string]any) {
			d := testenv.SSHD(t)
			return startServer(t, serverOpts{config: humanFilesPolicy}), map[string]any{
				"host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile,
			}
		}},
	} {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "files"
			conn := mustOK(t, srv.call(t, "ssh_connect", params))
			tok := str(conn["sessionToken"])
			// Over SSH the workspace is where the login starts, which
			// outlives the test: everything goes under a directory of its
			// own there, removed at the end.
			root := str(conn["connection"].(map[string]any)["cwd"])
			dir := "hf-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			t.Cleanup(func() { os.RemoveAll(filepath.Join(root, dir)) })
			args := func(more map[string]any) map[string]any {
				more["sessionName"], more["sessionToken"] = "files", tok
				return more
			}
			exec := func(command string) map[string]any {
				return mustOK(t, srv.call(t, "ssh_exec", args(map[string]any{"command": command})))
			}
			// The agent works from a directory of its own: relative paths
			// on the page are the workspace's, not the shell's.
			mustOK(t, srv.call(t, "ssh_exec", args(map[string]any{"command": "mkdir -p " + dir + "/work && cd " + dir + "/work"})))
			url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
			token := dataDirToken(t, srv.dataDir)
			ctx := testenv.Browser(t)
			signIn(t, ctx, url, token)
			if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, `window.tandem ? window.tandem.status() : ""`, "live")

			// The drop: 300 KiB of every byte value, into up/.
			const n = 300 << 10
			want := droppedBytes(n)
			sum := sha256.Sum256(want)
			hash := hex.EncodeToString(sum[:])
			if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#upload-dir`), dir+"/up"), dropBytes("blob.bin", n)); err != nil {
				t.Fatal(err)
			}
			filesMessage(t, ctx, "Uploaded "+dir+"/up/blob.bin ("+strconv.Itoa(n)+" bytes, sha256 "+hash+")")

			r := exec("sha256sum ../up/blob.bin")
			if got := str(result(t, r)["stdout"]); !strings.HasPrefix(got, hash+" ") {
				t.Errorf("the file in the workspace hashes to %q, want %s", got, hash)
			}
			files := userFiles(t, r)
			if len(files) != 1 {
				t.Fatalf("userFiles after the drop: %v", r)
			}
			up := files[0]
			if up["path"] != dir+"/up/blob.bin" || up["bytes"] != float64(n) || up["sha256"] != hash || up["direction"] != "upload" ||
				!strings.HasPrefix(str(up["viewer"]), "operator ") {
				t.Errorf("the upload as told: %v", up)
			}
			if _, err := time.Parse(time.RFC3339Nano, str(up["at"])); err != nil {
				t.Errorf("at: %v", err)
			}
			if r := exec("true"); r["userFiles"] != nil {
				t.Errorf("the upload told twice: %v", r)
			}

			// The download, by path, saved by the browser.
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
			}), chromedp.SetValue(chromedp.CSS(`#download-path`), dir+"/up/blob.bin"), chromedp.Click(chromedp.CSS(`#download`))); err != nil {
				t.Fatal(err)
			}
			filesMessage(t, ctx, "Downloaded "+dir+"/up/blob.bin ("+strconv.Itoa(n)+" bytes)")
			completed := false
			for ev, err := range progress {
				if err != nil {
					t.Fatalf("the download: %v", err)
				}
				if ev.State == browser.DownloadProgressStateCompleted {
					if b, err := os.ReadFile(filepath.Join(saved, ev.GUID)); err != nil || sha256.Sum256(b) != sum {
						t.Errorf("the saved download is not the file: %d bytes, %v", len(b), err)
					}
					completed = true
					break
				}
			}
			if !completed {
				t.Fatal("the browser never finished the download")
			}
			files = userFiles(t, exec("true"))
			if len(files) != 1 || files[0]["direction"] != "download" || files[0]["sha256"] != hash || files[0]["path"] != dir+"/up/blob.bin" {
				t.Errorf("the download as told: %v", files)
			}

			// Refused on the page, with the reason; nothing written or told.
			for _, tc := range []struct{ dir, want string }{
				{"../..", "leads out of the workspace"},
				{dir + "/secret", `path: "**/secret/**"`},
			} {
				if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#upload-dir`), tc.dir), dropBytes("x.bin", 10)); err != nil {
					t.Fatal(err)
				}
				msg := filesMessage(t, ctx, "Upload of "+tc.dir+"/x.bin refused: ")
				if !strings.Contains(msg, tc.want) {
					t.Errorf("the page says %q, want %q in it", msg, tc.want)
				}
			}
			if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#upload-dir`), dir+"/big"), dropBytes("big.bin", 1<<20+1)); err != nil {
				t.Fatal(err)
			}
			filesMessage(t, ctx, "Upload of "+dir+"/big/big.bin refused: the file is over the limit of 1048576 bytes (limits.uploadBytes")
			if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#download-path`), dir+"/secret/key"), chromedp.Click(chromedp.CSS(`#download`))); err != nil {
				t.Fatal(err)
			}
			filesMessage(t, ctx, "Download of "+dir+"/secret/key refused: ")
			r = exec("ls ../secret ../big 2>&1; true")
			if out := str(result(t, r)["stdout"]); strings.Count(out, "No such file") != 2 {
				t.Errorf("a refused upload wrote: %s", out)
			}
			if r["userFiles"] != nil {
				t.Errorf("a refused transfer was told: %v", r)
			}

			// A browser that goes away halfway through an upload leaves no
			// file under the name, and no part of one.
			base := strings.SplitN(url, "/s/", 2)[0]
			cutUpload(t, url+"/files?path="+dir+"/cut/half.bin", base, token)
			for deadline := time.Now().Add(30 * time.Second); !auditedRefusal(t, srv.dataDir, dir+"/cut/half.bin"); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the cut upload was never audited")
				}
			}
			if r := exec("ls -A ../cut 2>&1; true"); str(result(t, r)["stdout"]) != "" || r["userFiles"] != nil {
				t.Errorf("the cut upload left: %v", r)
			}

			// The watch link alone, and another origin.
			filesURL := url + "/files?path=" + dir + "/watcher.bin"
			for _, tc := range []struct {
				name, method string
				header       http.Header
			}{
				{"the watch link's upload", "POST", http.Header{"Origin": {base}}},
				{"the watch link's download", "GET", nil},
				{"an upload from another origin", "POST", http.Header{"Origin": {"http://127.0.0.1:1"}, "Cookie": {"tandem_operator=" + token}}},
			} {
				req, _ := http.NewRequest(tc.method, filesURL, strings.NewReader("x"))
				req.Header = tc.header
				if req.Header == nil {
					req.Header = http.Header{}
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s: %d, want 401 or 403", tc.name, resp.StatusCode)
				}
			}
			watcher := testenv.Browser(t)
			if err := chromedp.Do(watcher, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, watcher, `window.tandem ? window.tandem.status() : ""`, "live")
			if n, err := chromedp.Run(watcher, chromedp.Evaluate[int](`document.querySelectorAll('#files, input[type=file], #download').length`)); err != nil || n != 0 {
				t.Errorf("the watch link's page offers %d file controls (%v)", n, err)
			}
			if r := exec("ls ../watcher.bin 2>&1; true"); !strings.Contains(str(result(t, r)["stdout"]), "No such file") || r["userFiles"] != nil {
				t.Errorf("the watch link moved a file: %v", r)
			}

			// The audit: each transfer, refusals included, never the bytes.
			var moved, refused int
			for _, rec := range auditRecords(t, srv.dataDir) {
				if rec.Event != "user_file" {
					continue
				}
				var a map[string]any
				_ = json.Unmarshal(rec.Args, &a)
				switch {
				case rec.Outcome == "ok":
					moved++
					if a["sha256"] != hash || a["bytes"] != float64(n) || a["path"] != dir+"/up/blob.bin" || !strings.HasPrefix(rec.Actor, "operator") {
						t.Errorf("audited transfer: %+v %v", rec, a)
					}
				default:
					refused++
				}
			}
			// The escape, the two denials and the cut upload; the upload over
			// the limit says so in its Content-Length and is refused before
			// a byte is read or a path looked at, like the watch link's.
			if moved != 2 || refused != 4 {
				t.Errorf("the audit has %d transfers and %d refusals, want 2 and 4", moved, refused)
			}
		})
	}
}

// cutUpload starts an upload of 512 KiB as the operator's browser would,
// sends half of it and hangs up.
func cutUpload(t *testing.T, fileURL, origin, token string) {
	t.Helper()
	u, err := neturl.Parse(fileURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nCookie: tandem_operator=%s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		u.RequestURI(), u.Host, origin, token, 512<<10)
	if _, err := c.Write(make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
}

// auditedRefusal reports whether the audit holds a refused transfer of
// the path.
func auditedRefusal(t *testing.T, dataDir, path string) bool {
	t.Helper()
	for _, rec := range auditRecords(t, dataDir) {
		var a map[string]any
		_ = json.Unmarshal(rec.Args, &a)
		if rec.Event == "user_file" && rec.Outcome != "ok" && a["path"] == path {
			return true
		}
	}
	return false
}

// TestHumanFilesNeedTheAudit: while the audit log cannot be written, the
// page's upload moves nothing and says why, as a call would; once it can,
// the same upload lands.
func TestHumanFilesNeedTheAudit(t *testing.T) {
	s := localSession(t, serverOpts{})
	url := str(mustOK(t, s.srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	token := dataDirToken(t, s.srv.dataDir)
	upload := func() (int, map[string]any) {
		req, _ := http.NewRequest("POST", url+"/files?path=audited.txt", strings.NewReader("hello"))
		req.Header = operatorHeader(url, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	release := lockDB(t, s.srv.dataDir)
	status, m := upload()
	if status != http.StatusServiceUnavailable || m["error"] != "audit_unavailable" {
		t.Errorf("upload while the audit is locked: %d %v", status, m)
	}
	release()
	if r := s.exec(t, "ls audited.txt 2>&1; true"); !strings.Contains(str(result(t, r)["stdout"]), "No such file") || r["userFiles"] != nil {
		t.Errorf("an unaudited upload: %v", r)
	}
	if status, m := upload(); status != http.StatusOK || m["sha256"] != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Errorf("upload once the audit is back: %d %v", status, m)
	}
}
