package main

import (
	"bytes"
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
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tandem-sh/tandem/internal/server"
	tterm "github.com/tandem-sh/tandem/internal/term"
	"github.com/tandem-sh/tandem/internal/web"
)

// detachKey ends `tandem attach` in a raw terminal, where Ctrl-C goes to
// the session: Ctrl-], as telnet has it.
const detachKey = 0x1d

// ctrlC also detaches a watcher: its raw terminal makes no SIGINT of it,
// and a watcher who presses it means to quit.
const ctrlC = 0x03

// errWatcherQuit ends a watcher's key reading at its Ctrl-C.
var errWatcherQuit = errors.New("the watcher pressed Ctrl-C")

type attachFlags struct {
	observe   bool
	dataDir   string
	web       string
	tokenFile string // a cluster's shared operator token (web.operatorTokenFile)
}

func attachCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f attachFlags
	c := &cobra.Command{
		Use:   "attach MONITORING-URL | SESSION-ID | SESSION-NAME",
		Short: "Join a live session from this terminal, as the browser page does",
		Long: "Join a live session from a real terminal: its screen here, your keys there (raw mode, Ctrl-C " +
			"included), resized with this window. Ctrl-] detaches. What you type counts as the human's, so the " +
			"agent's next call is told. Your keys count only with the operator token, which attach reads from the data " +
			"dir (or --token-file) and presents only to a live tandem of that data dir (or --web); without it attach " +
			"watches. Give the session's monitoring URL, or, as the operator, its session id or name (from the dashboard). " +
			"--observe watches without typing.",
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
	hdr := http.Header{"Origin": {origin}, "User-Agent": {"tandem-attach"}}
	if tok := attachToken(f, origin); tok != "" {
		hdr.Set("Authorization", "Bearer "+tok)
	}
	conn, resp, err := websocket.Dial(ctx, ws.String(), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return errors.New("no live session behind that URL: it ended, or the link is wrong")
		}
		return fmt.Errorf("attach: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	if !f.observe && resp.Header.Get(web.InputHeader) != web.InputTyping {
		// The server drops a key-only viewer's keys; say so, and send none.
		fmt.Fprint(stderr, "tandem: watching only: typing needs the operator token (--data-dir's, for a URL of the dashboard it noted, or --token-file with --web)\r\n")
		f.observe = true
	}

	in, isFile := stdin.(*os.File)
	out, _ := stdout.(*os.File)
	// A terminal goes raw even to watch: its keys are read only for Ctrl-]
	// (and Ctrl-C, which a watcher means as "quit"), where cooked mode
	// would echo ^] and never detach.
	raw := isFile && term.IsTerminal(int(in.Fd()))
	if raw {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("attach: raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), old) }()
		if f.observe {
			fmt.Fprint(stderr, "tandem: watching; Ctrl-] detaches\r\n")
		} else {
			fmt.Fprint(stderr, "tandem: attached; Ctrl-] detaches\r\n")
		}
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
	switch {
	case !f.observe:
		go func() {
			defer cancel() // end of input, or Ctrl-]: detach
			relayKeys(ctx, stdin, raw, answerPause, func(keys []byte) error {
				return send(map[string]any{"t": "i", "d": string(keys)})
			})
		}()
	case raw:
		go func() {
			defer cancel() // Ctrl-] or Ctrl-C: detach; every other key is dropped
			relayKeys(ctx, stdin, raw, answerPause, func(keys []byte) error {
				if bytes.IndexByte(keys, ctrlC) >= 0 {
					return errWatcherQuit
				}
				return nil
			})
		}()
	}
	// What acts on the terminal rather than draws on it never reaches it:
	// a query in the session's output would have it answer, and the answer
	// arrive here as if typed.
	var screen tterm.OutputFilter
	var shown []byte
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
			if shown = screen.Write(shown[:0], data); len(shown) > 0 {
				if _, err := stdout.Write(shown); err != nil {
					return err
				}
			}
		}
	}
}

// answerPause is how long a sequence may stay unfinished in the
// terminal's input before it counts as keys: a terminal writes each answer
// at once, a human pressing Esc or Alt-[ then pauses.
const answerPause = 50 * time.Millisecond

// relayKeys reads the terminal's input and sends the human's keys, until
// the input ends, Ctrl-] (in a raw terminal) or ctx. A terminal's answers
// to queries (tterm.AnswerFilter) are not keys: they are dropped. A
// sequence still open after pause without input is keys.
func relayKeys(ctx context.Context, stdin io.Reader, raw bool, pause time.Duration, send func([]byte) error) {
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 4096)
			n, err := stdin.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var answers tterm.AnswerFilter
	var paused <-chan time.Time
	emit := func(keys []byte) bool { return len(keys) == 0 || send(keys) == nil }
	for {
		select {
		case <-ctx.Done():
			return
		case <-paused:
			paused = nil
			if !emit(answers.Flush(nil)) {
				return
			}
		case chunk, ok := <-chunks:
			if !ok {
				emit(answers.Flush(nil))
				return
			}
			if i := bytes.IndexByte(chunk, detachKey); raw && i >= 0 {
				emit(answers.Flush(answers.Write(nil, chunk[:i])))
				return
			}
			if !emit(answers.Write(nil, chunk)) {
				return
			}
			paused = nil
			if answers.Pending() {
				paused = time.After(pause)
			}
		}
	}
}

// attachToken is the operator token attach presents with its WebSocket,
// so that its keys count: the --token-file's, or the data dir's if it has
// one (never made here). It goes only to a dashboard of a tandem that is
// alive on the data dir (or to --web), never to whatever listens at a URL
// someone handed over: a program in a session could listen on loopback
// too, even on the port of a tandem that has exited.
func attachToken(f attachFlags, origin string) string {
	dir := attachDataDir(f)
	bases := []string{webBase(f.web)}
	if f.web == "" {
		bases = liveBases(dir)
	}
	home := false
	for _, base := range bases {
		if b, err := url.Parse(base); err == nil && strings.EqualFold(b.Scheme+"://"+b.Host, origin) {
			home = true
		}
	}
	if !home {
		return ""
	}
	if f.tokenFile != "" {
		tok, _ := server.SharedOperatorToken(f.tokenFile)
		return tok
	}
	b, err := os.ReadFile(filepath.Join(dir, server.DashboardTokenFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func attachDataDir(f attachFlags) string {
	if f.dataDir != "" {
		return f.dataDir
	}
	home, _ := os.UserHomeDir()
	return server.DefaultDataDir(home)
}

// watchURL asks this data dir's live tandems, as their operator, for the
// monitoring URL of a session, named by its id or by its name.
func watchURL(ctx context.Context, f attachFlags, session string) (string, error) {
	dir := attachDataDir(f)
	tok, err := server.SharedOperatorToken(f.tokenFile)
	if f.tokenFile == "" {
		tok, err = server.OperatorToken(dir)
	}
	if err != nil {
		return "", err
	}
	bases := []string{webBase(f.web)}
	if f.web == "" {
		if bases = liveBases(dir); len(bases) == 0 {
			return "", fmt.Errorf("no tandem is serving on the data dir %s: pass --data-dir or --web ADDR, or the monitoring URL instead", dir)
		}
	}
	var found []string
	for _, base := range bases {
		id, err := sessionID(ctx, base, tok, session)
		if err != nil {
			return "", err
		}
		if id != "" {
			found = append(found, base+" "+id)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no live session has the id or name %q (the dashboard lists them)", session)
	case 1:
	default:
		return "", fmt.Errorf("%q names sessions of several tandems on this data dir (%s): pass --web ADDR", session, strings.Join(found, ", "))
	}
	base, id, _ := strings.Cut(found[0], " ")
	return watchOne(ctx, base, tok, id)
}

// sessionID finds a session of the dashboard at base by id or by name;
// "" when it has none. A name several live sessions share (different
// tenants or actors) is refused with their owners, so the operator picks
// by id.
func sessionID(ctx context.Context, base, tok, session string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/state", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask %s for its sessions: %w", base, err)
	}
	defer resp.Body.Close()
	var st struct {
		Sessions []web.SessionRow `json:"sessions"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&st) != nil {
		return "", fmt.Errorf("ask %s for its sessions: %s", base, resp.Status)
	}
	var named []web.SessionRow
	for _, r := range st.Sessions {
		if r.Ended {
			continue
		}
		if r.ID == session {
			return r.ID, nil
		}
		if r.Name == session {
			named = append(named, r)
		}
	}
	switch len(named) {
	case 0:
		return "", nil
	case 1:
		return named[0].ID, nil
	}
	var owners []string
	for _, r := range named {
		owner := r.Tenant + "/" + r.Actor
		if r.Actor == "" {
			owner = "stdio"
		}
		owners = append(owners, r.ID+" ("+owner+")")
	}
	return "", fmt.Errorf("several live sessions are named %q: %s; attach by id", session, strings.Join(owners, ", "))
}

// watchOne asks the dashboard at base for the monitoring URL of session id.
func watchOne(ctx context.Context, base, tok, id string) (string, error) {
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
