package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// detachKey ends `tandem attach` in a raw terminal, where Ctrl-C goes to
// the session: Ctrl-], as telnet has it.
const detachKey = 0x1d

type attachFlags struct {
	observe   bool
	dataDir   string
	web       string
	tokenFile string // a cluster's shared operator token (web.operatorTokenFile)
}

func attachCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f attachFlags
	c := &cobra.Command{
		Use:   "attach MONITORING-URL | SESSION-ID",
		Short: "Join a live session from this terminal, as the browser page does",
		Long: "Join a live session from a real terminal: its screen here, your keys there (raw mode, Ctrl-C " +
			"included), resized with this window. Ctrl-] detaches. What you type counts as the human's, so the " +
			"agent's next call is told. Give the session's monitoring URL, or, as the operator, its session id " +
			"(from the dashboard), which this data dir's operator token opens. --observe watches without typing.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return attach(ctx, f, args[0], stdin, stdout, stderr)
		},
	}
	c.Flags().BoolVar(&f.observe, "observe", false, "watch only: send no keys")
	c.Flags().StringVar(&f.dataDir, "data-dir", "", "with a session id: tandem's data dir, which holds the operator token (default $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&f.web, "web", "", "with a session id: the dashboard's address (host:port, or a URL such as a balancer's https://…), if not the one the last tandem noted")
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "with a session id: the operator token file the nodes share (web.operatorTokenFile), instead of the data dir's")
	return c
}

func attach(ctx context.Context, f attachFlags, target string, stdin io.Reader, stdout, stderr io.Writer) error {
	page := target
	if !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
		var err error
		if page, err = watchURL(ctx, f, target); err != nil {
			return err
		}
	}
	u, err := url.Parse(page)
	if err != nil || !strings.HasPrefix(u.Path, "/s/") {
		return fmt.Errorf("%q is not a monitoring URL (http://HOST:PORT/s/KEY)", page)
	}
	origin := u.Scheme + "://" + u.Host
	ws := *u
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	ws.Path = strings.TrimSuffix(u.Path, "/") + "/ws"
	conn, resp, err := websocket.Dial(ctx, ws.String(), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}, "User-Agent": {"tandem-attach"}}})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return errors.New("no live session behind that URL: it ended, or the link is wrong")
		}
		return fmt.Errorf("attach: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)

	in, isFile := stdin.(*os.File)
	out, _ := stdout.(*os.File)
	raw := !f.observe && isFile && term.IsTerminal(int(in.Fd()))
	if raw {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("attach: raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), old) }()
		fmt.Fprint(stderr, "tandem: attached; Ctrl-] detaches\r\n")
	}
	send := func(m map[string]any) error {
		b, _ := json.Marshal(m)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	if out != nil && term.IsTerminal(int(out.Fd())) {
		resize := func() {
			if w, h, err := term.GetSize(int(out.Fd())); err == nil {
				_ = send(map[string]any{"t": "r", "c": w, "r": h})
			}
		}
		resize()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				resize()
			}
		}()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !f.observe {
		go func() {
			defer cancel() // end of input, or Ctrl-]: detach
			buf := make([]byte, 4096)
			for {
				n, err := stdin.Read(buf)
				if n > 0 {
					chunk := buf[:n]
					if i := strings.IndexByte(string(chunk), detachKey); raw && i >= 0 {
						if i > 0 {
							_ = send(map[string]any{"t": "i", "d": string(chunk[:i])})
						}
						return
					}
					if send(map[string]any{"t": "i", "d": string(chunk)}) != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			switch {
			case errors.As(err, &ce):
				if ce.Reason != "" {
					fmt.Fprintf(stderr, "\r\ntandem: %s\r\n", ce.Reason)
				}
				return nil
			case ctx.Err() != nil:
				_ = conn.Close(websocket.StatusNormalClosure, "detached")
				return nil
			}
			return fmt.Errorf("attach: %w", err)
		}
		if typ == websocket.MessageBinary {
			if _, err := stdout.Write(data); err != nil {
				return err
			}
		}
	}
}

// watchURL asks this data dir's tandem, as its operator, for the
// monitoring URL of a session id.
func watchURL(ctx context.Context, f attachFlags, id string) (string, error) {
	dir := f.dataDir
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = defaultDataDir(home)
	}
	tok, err := sharedOperatorToken(f.tokenFile)
	if f.tokenFile == "" {
		tok, err = operatorToken(dir)
	}
	if err != nil {
		return "", err
	}
	base := webBase(f.web)
	if f.web == "" {
		b, err := os.ReadFile(filepath.Join(dir, dashboardURLFile))
		if err != nil {
			return "", fmt.Errorf("no tandem has noted its dashboard in %s: pass --web ADDR, or the monitoring URL instead", dir)
		}
		base = strings.TrimSpace(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/sessions/"+url.PathEscape(id)+"/watch", strings.NewReader("{}"))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask %s for the session: %w", base, err)
	}
	defer resp.Body.Close()
	var r struct {
		URL     string `json:"url"`
		Message string `json:"message"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&r)
	if resp.StatusCode != http.StatusOK || r.URL == "" {
		return "", fmt.Errorf("session %s: %s %s", id, resp.Status, r.Message)
	}
	return base + r.URL, nil
}
