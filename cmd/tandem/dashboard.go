package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/server"
	"github.com/tandem-sh/tandem/internal/web"
)

func dashboardURLCmd() *cobra.Command {
	var dataDir, webAddr, tokenFile string
	c := &cobra.Command{
		Use:   "dashboard-url",
		Short: "Print the operator dashboard's sign-in link of every tandem serving on a data dir",
		Long: "Print, for every live tandem process on the data dir, the link that signs a browser in to its " +
			"operator dashboard (each process serves its own), with its mode, start time and sessions. Processes " +
			"that have exited are skipped. The link holds the operator token: keep it to yourself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := dataDir
			if dir == "" {
				home, _ := os.UserHomeDir()
				dir = server.DefaultDataDir(home)
			}
			var serving []server.LiveInfo
			if webAddr == "" {
				var err error
				if serving, err = server.LiveServing(dir); err != nil {
					return err
				}
				if len(serving) == 0 {
					return fmt.Errorf("no tandem is serving on the data dir %s (one that has exited leaves no link): start one with tandem serve, or pass --data-dir or --web", dir)
				}
			}
			tok, err := server.SharedOperatorToken(tokenFile)
			if tokenFile == "" {
				tok, err = server.OperatorToken(dir)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if webAddr != "" {
				fmt.Fprintln(out, web.DashboardURL(webBase(webAddr), tok))
				return nil
			}
			for _, info := range serving {
				link := web.DashboardURL(info.Web, tok)
				fmt.Fprintf(out, "%s  %s, pid %d, started %s, %s\n", link, info.Mode, info.PID,
					info.Started.Local().Format("2006-01-02 15:04:05"), sessionsOf(cmd.Context(), info.Web, tok))
			}
			return nil
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "tandem's data dir (default: $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&webAddr, "web", "", "the dashboard's address (host:port, or a URL such as a balancer's https://…): print its link only")
	c.Flags().StringVar(&tokenFile, "token-file", "", "the operator token file the nodes of a cluster share (web.operatorTokenFile), instead of the data dir's")
	return c
}

// liveBases is the dashboard address of every live tandem of the data dir.
func liveBases(dir string) []string {
	live, _ := server.LiveServing(dir)
	var out []string
	for _, l := range live {
		out = append(out, strings.TrimRight(l.Web, "/"))
	}
	return out
}

// sessionsOf asks a live dashboard how many sessions it lists, briefly:
// an answer it cannot give is said, not waited for.
func sessionsOf(ctx context.Context, base, tok string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/state", nil)
	if err != nil {
		return "sessions unknown"
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "not answering"
	}
	defer resp.Body.Close()
	var st struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&st) != nil {
		return "sessions unknown (" + resp.Status + ")"
	}
	if len(st.Sessions) == 1 {
		return "1 session"
	}
	return strconv.Itoa(len(st.Sessions)) + " sessions"
}

// webBase is the dashboard's base URL from --web: host:port means plain
// HTTP (a loopback listener); a full URL, such as a balancer's https one,
// is taken as it is.
func webBase(web string) string {
	if strings.Contains(web, "://") {
		return strings.TrimRight(web, "/")
	}
	return "http://" + web
}
