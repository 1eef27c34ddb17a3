package session

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/shell"
)

// record starts the session's asciicast and hooks it to the shell.
func (m *Manager) record(s *Session, so *shell.Options) error {
	if m.opts.RecordingsDir == "" {
		return nil
	}
	cols, rows := so.Cols, so.Rows
	if cols <= 0 || rows <= 0 {
		cols, rows = shell.DefaultCols, shell.DefaultRows
	}
	path := filepath.Join(m.opts.RecordingsDir, s.ID+".cast")
	w, err := recording.Create(path, recording.Header{Width: cols, Height: rows, Title: s.Name, IdleTimeLimit: 2})
	if err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	w.Cap(m.opts.RecordingBytes)
	s.rec, s.recPath = w, path
	so.Output, so.Input, so.Resized = w.Output, w.Input, w.Resize
	return nil
}

// markCommand tells the monitoring pages that a command started or ended,
// and marks in the recording where (whose, and its line) or its exit code,
// for the replay's seek bar. Labels:
// "agent: LINE", "human: LINE", "end agent: 0" ("?" when unknown).
func (s *Session) markCommand(r shell.Record, ended bool) {
	if r.Source != "agent" && r.Source != "user" {
		return
	}
	s.changed() // the monitoring page marks the command's line too
	if s.rec == nil {
		return
	}
	who := "agent"
	if r.Source == "user" {
		who = "human"
	}
	if ended {
		code := "?"
		if r.ExitKnown {
			code = strconv.Itoa(r.ExitCode)
		}
		s.rec.Marker("end " + who + ": " + code)
		return
	}
	line := r.Command
	if red := s.Target.ViewRedact(); red != nil {
		line, _ = red.String(line)
	}
	if len(line) > maxMarkerLine {
		line = strings.ToValidUTF8(line[:maxMarkerLine], "") + "…"
	}
	s.rec.Marker(who + ": " + line)
}

// maxMarkerLine bounds the command line a marker carries.
const maxMarkerLine = 200

// closeRecording finishes the cast once the shell is gone; it reports
// whether there is a complete recording to replay.
func (s *Session) closeRecording() bool {
	if s.rec == nil {
		return false
	}
	if s.sh != nil {
		<-s.sh.Done()
	}
	return s.rec.Close() == nil
}

// RecordingPath is where the session's asciicast is, or "".
func (s *Session) RecordingPath() string { return s.recPath }
