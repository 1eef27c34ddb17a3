package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/seal"
	"github.com/tandem-sh/tandem/internal/server"
)

// commandIDRE is what a command id looks like: the raw output's file is
// found by it, so nothing else may name a path.
var commandIDRE = regexp.MustCompile(`^(cmd|bg)_[0-9a-f]{16}$`)

// auditRawKeysCmd makes the operator's key pair for redact.rawKey.
func auditRawKeysCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "raw-keys PRIVATE-KEY-FILE PUBLIC-KEY-FILE",
		Short: "Make the key pair that keeps redacted output for the operator (redact.rawKey)",
		Long: "Writes a new X25519 key pair. Set redact.rawKey in tandem.yaml to the public key's file: the exact " +
			"bytes of every output stream that had secrets redacted are then kept sealed to it, and only " +
			"`tandem audit raw` with the private key opens them. Keep the private key away from the server.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, priv, err := seal.NewKeys()
			if err != nil {
				return err
			}
			for _, f := range []struct {
				path string
				key  seal.Key
				mode os.FileMode
			}{{args[0], priv, 0o600}, {args[1], pub, 0o644}} {
				file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
				if err != nil {
					return fmt.Errorf("raw-keys: %w (an existing key is never overwritten)", err)
				}
				_, err = fmt.Fprintln(file, f.key.String())
				if cerr := file.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return fmt.Errorf("raw-keys: %w", err)
				}
			}
			_, err = fmt.Fprintf(stdout, "private key: %s (keep it off the server)\npublic key: %s (redact.rawKey in tandem.yaml)\n", args[0], args[1])
			return err
		},
	}
}

// auditRawCmd prints a command's exact output, before redaction.
func auditRawCmd(stdout io.Writer) *cobra.Command {
	var dataDir, keyFile, stream string
	c := &cobra.Command{
		Use:   "raw COMMAND-ID --key PRIVATE-KEY-FILE",
		Short: "Print a command's exact output, secrets included, from what redact.rawKey kept",
		Long: "Opens the sealed copy tandem kept of a command's output stream whose readable copy had secrets " +
			"redacted. Only the private key of redact.rawKey opens it. A stream with nothing redacted has no " +
			"sealed copy: its output in the spool is exact.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if !commandIDRE.MatchString(id) {
				return fmt.Errorf("raw: %q is not a command id (cmd_ and 16 hex digits)", id)
			}
			if stream != "stdout" && stream != "stderr" {
				return fmt.Errorf("raw: --stream must be stdout or stderr, not %q", stream)
			}
			if keyFile == "" {
				return fmt.Errorf("raw: --key names the private key file (tandem audit raw-keys made it)")
			}
			priv, err := seal.ReadKey(keyFile)
			if err != nil {
				return err
			}
			pub, err := seal.PublicOf(priv)
			if err != nil {
				return err
			}
			if dataDir == "" {
				home, _ := os.UserHomeDir()
				dataDir = server.DefaultDataDir(home)
			}
			spool := filepath.Join(dataDir, "spool")
			names := []string{id + "." + stream + ".sealed"}
			if stream == "stdout" {
				names = append(names, id+".out.sealed") // a human's command: one terminal stream
			}
			for _, n := range names {
				p := filepath.Join(spool, n)
				if _, err := os.Stat(p); err == nil {
					return seal.Open(p, pub, priv, stdout)
				}
			}
			return fmt.Errorf("raw: no sealed %s of %s in %s: nothing in it was redacted (its output is exact), or redact.rawKey was not set when it ran", stream, id, spool)
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "state directory (default $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&keyFile, "key", "", "the private key file of redact.rawKey")
	c.Flags().StringVar(&stream, "stream", "stdout", "stdout or stderr")
	return c
}
