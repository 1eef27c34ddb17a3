package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/spool"
)

// A session's commands stay readable by ID within a bound on the disk
// their outputs take, not within a count that a paste can exceed. The
// latest recentKept are held in memory, as they stand (a running
// command's streams keep filling); older finished ones are a line each in
// an index file, their streams on disk only. Once the finished commands'
// bytes pass the bound, the oldest go first: their files are deleted, and
// a note says why, so a read names the reason rather than not knowing the
// command. Reports come in order, so the oldest are the ones the agent
// has been told of longest ago.
const (
	// recentKept is how many of the latest commands are held in memory.
	recentKept = 256
	// minCommandCost is the least a command counts against the bound: its
	// index line and a file system block, so a paste of many commands
	// that print nothing is bounded too, and with it the index's memory.
	minCommandCost = 4 << 10
	// goneKept is how many removed commands' notes are kept at least
	// (at most twice as many).
	goneKept = 8192
)

// DefaultKeptOutputBytes is the bound on a session's outputs on disk
// when the manager's options name none.
const DefaultKeptOutputBytes = 1 << 30

// Forgotten says why a command's output can no longer be read.
type Forgotten struct {
	// At is when it was removed.
	At time.Time
	// Bytes is what it took on disk.
	Bytes int64
	// Limit is the bound that removed it (Options.KeptOutputBytes).
	Limit int64
	// Unreported is true when the agent had not been told of the command
	// yet: the human's commands since then passed the bound by themselves.
	Unreported bool
}

// entry is one kept command: in memory (k), or a line of the index file.
type entry struct {
	k          *kept
	off        int64
	n          int
	files      [2]*spool.File // stdout, stderr of a stored one, until both are on disk
	cost       int64          // counted against the bound once done
	unreported bool           // a human command the gate has not reported yet
}

// history is a session's kept commands; its fields are guarded by the
// session's mu.
type history struct {
	dir     *spool.Dir
	limit   int64
	entries map[string]*entry
	order   []string // kept command IDs, oldest first, from first on
	first   int
	bytes   int64    // the finished ones' cost
	index   *os.File // unlinked: gone with the process
	size    int64    // the index's length
	live    int64    // bytes of its lines still kept
	gone    map[string]Forgotten
	goneIDs []string // oldest first
	err     error    // the index's first failure
	held    []string // stored commands whose streams are not all on disk yet
	heldMax int      // when to look at held again
	heldMem int64    // about what held's streams hold in memory
	// removed, if set, is told which commands' files a trim deleted
	// (the journal clears their rows' paths).
	removed func(ids []string)
}

// record is a command as its index line keeps it.
type record struct {
	ID           string             `json:"id"`
	Source       string             `json:"source"`
	Command      string             `json:"command"`
	Stdout       string             `json:"stdout,omitempty"`
	StdoutBytes  int64              `json:"stdoutBytes,omitempty"`
	Stderr       string             `json:"stderr,omitempty"`
	StderrBytes  int64              `json:"stderrBytes,omitempty"`
	ExitCode     int                `json:"exitCode"`
	ExitKnown    bool               `json:"exitKnown"`
	Started      time.Time          `json:"started"`
	Duration     time.Duration      `json:"duration"`
	Cwd          string             `json:"cwd"`
	Merged       bool               `json:"merged,omitempty"`
	Viewer       string             `json:"viewer,omitempty"`
	Unattributed bool               `json:"unattributed,omitempty"`
	Interrupt    *shell.Interrupt   `json:"interrupt,omitempty"`
	Repaired     []string           `json:"repaired,omitempty"`
	Redacted     shell.Redactions   `json:"redacted"`
	Blocked      []shell.ExecRecord `json:"blocked,omitempty"`
}

// keep files a command for read-back. A running command's partial record
// never replaces its final one, whichever arrives first.
func (s *Session) keep(r shell.Record, done bool) {
	if r.ID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hist
	if h.entries == nil {
		h.entries = map[string]*entry{}
		h.dir, h.limit = s.spool, s.keptBytes
	}
	e, ok := h.entries[r.ID]
	switch {
	case !ok:
		e = &entry{k: &kept{rec: r, done: done}}
		h.entries[r.ID] = e
		h.order = append(h.order, r.ID)
	case e.k == nil || e.k.done:
		return
	default:
		e.k.rec, e.k.done = r, done
	}
	if !done {
		return
	}
	e.cost = max(r.Stdout.DiskBytes()+r.Stderr.DiskBytes()+int64(len(r.Command)), minCommandCost)
	h.bytes += e.cost
	h.trim()
}

// trim moves finished commands past the latest recentKept to the index,
// and removes the oldest while their bytes pass the bound.
func (h *history) trim() {
	if h.dir == nil {
		return // tests without a spool: everything in memory
	}
	for i := len(h.order) - recentKept - 1; i >= h.first; i-- {
		e := h.entries[h.order[i]]
		if e.k == nil {
			break // older ones were moved before
		}
		if e.k.done {
			h.store(e)
		}
	}
	h.letGo()
	if h.limit <= 0 {
		return
	}
	var gone []string
	for h.first < len(h.order)-1 && h.bytes > h.limit {
		id := h.order[h.first]
		e := h.entries[id]
		if e.k != nil && !e.k.done {
			break // a running command; what follows is newer
		}
		h.remove(id, e)
		gone = append(gone, id)
		h.order[h.first] = ""
		h.first++
	}
	if len(gone) > 0 && h.removed != nil {
		h.removed(gone)
	}
	if h.first > 64 && h.first > len(h.order)/2 {
		h.order, h.first = append([]string(nil), h.order[h.first:]...), 0
	}
	h.compact()
}

// store writes e's record to the index and lets go of it in memory; its
// streams go to their files first, so nothing writes them again later.
func (h *history) store(e *entry) {
	if h.err != nil {
		return
	}
	if h.index == nil {
		f, err := newIndex(h.dir)
		if err != nil {
			h.err = err
			return
		}
		h.index = f
	}
	r := e.k.rec
	if m := inMemory(r.Stdout) + inMemory(r.Stderr); m > 0 {
		// The journal writes its files soon, off the shell's path (a
		// paste runs first); until then the streams are read in memory.
		e.files = [2]*spool.File{r.Stdout, r.Stderr}
		h.held = append(h.held, r.ID)
		h.heldMem += m
	}
	line, err := json.Marshal(record{
		ID: r.ID, Source: r.Source, Command: r.Command,
		Stdout: r.Stdout.Name(), StdoutBytes: r.Stdout.Size(), Stderr: r.Stderr.Name(), StderrBytes: r.Stderr.Size(),
		ExitCode: r.ExitCode, ExitKnown: r.ExitKnown, Started: r.Started, Duration: r.Duration, Cwd: r.Cwd,
		Merged: r.Merged, Viewer: r.Viewer, Unattributed: r.Unattributed, Interrupt: r.Interrupt,
		Repaired: r.Repaired, Redacted: r.Redacted, Blocked: r.Blocked,
	})
	if err != nil {
		h.err = err
		return
	}
	if _, err := h.index.WriteAt(line, h.size); err != nil {
		h.err = fmt.Errorf("history index: %w", err)
		return
	}
	e.k, e.off, e.n = nil, h.size, len(line)
	h.size += int64(len(line))
	h.live += int64(len(line))
}

// inMemory is what a finished stream holds in memory: none once on disk.
func inMemory(f *spool.File) int64 {
	if f.Spilled() || f.Removed() {
		return 0
	}
	return f.Size()
}

// maxHeldMemory bounds what stored commands' streams hold in memory while
// the journal has not written them: past it the oldest are written now,
// on the shell's path, so a long paste of commands that print a little
// each cannot fill memory while the journal yields to it.
const maxHeldMemory = 16 << 20

// letGo drops the streams of stored commands that are on disk now,
// looking again once held has doubled since the last look, or once they
// may hold more than maxHeldMemory; past that it writes the oldest out.
func (h *history) letGo() {
	if len(h.held) < h.heldMax && h.heldMem <= maxHeldMemory {
		return
	}
	kept := h.held[:0]
	h.heldMem = 0
	for _, id := range h.held {
		e, ok := h.entries[id]
		if !ok || e.k != nil || e.files == [2]*spool.File{} {
			continue
		}
		m := inMemory(e.files[0]) + inMemory(e.files[1])
		if m == 0 {
			e.files = [2]*spool.File{}
			continue
		}
		kept = append(kept, id)
		h.heldMem += m
	}
	clear(h.held[len(kept):])
	h.held = kept
	drop := 0
	for ; drop < len(h.held) && h.heldMem > maxHeldMemory; drop++ {
		e := h.entries[h.held[drop]]
		h.heldMem -= inMemory(e.files[0]) + inMemory(e.files[1])
		e.files[0].Release()
		e.files[1].Release()
		if inMemory(e.files[0])+inMemory(e.files[1]) == 0 {
			e.files = [2]*spool.File{}
		} // else the disk refused it: it stays readable in memory
	}
	h.held = append(h.held[:0], h.held[drop:]...)
	h.heldMax = 2*len(h.held) + 64
}

// newIndex creates an index file in dir and unlinks it: its space is
// freed when tandem closes it or ends, however it ends.
func newIndex(dir *spool.Dir) (*os.File, error) {
	f, err := os.CreateTemp(dir.Path, ".history-*")
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(dir.Path, 0o700); err == nil {
			f, err = os.CreateTemp(dir.Path, ".history-*")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("history index: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("history index: %w", err)
	}
	return f, nil
}

// remove deletes a finished command's files and leaves a note why.
func (h *history) remove(id string, e *entry) {
	var out, errf *spool.File
	if e.k != nil {
		out, errf = e.k.rec.Stdout, e.k.rec.Stderr
	} else if e.files != [2]*spool.File{} {
		out, errf = e.files[0], e.files[1]
	} else if r, err := h.read(e); err == nil {
		out, errf = h.dir.Reopen(r.Stdout, r.StdoutBytes), h.dir.Reopen(r.Stderr, r.StderrBytes)
	}
	_ = out.Remove()
	_ = errf.Remove()
	if e.k == nil {
		h.live -= int64(e.n)
	}
	h.bytes -= e.cost
	delete(h.entries, id)
	if h.gone == nil {
		h.gone = map[string]Forgotten{}
	}
	h.gone[id] = Forgotten{At: time.Now(), Bytes: e.cost, Limit: h.limit, Unreported: e.unreported}
	h.goneIDs = append(h.goneIDs, id)
	if len(h.goneIDs) >= 2*goneKept {
		for _, old := range h.goneIDs[:goneKept] {
			delete(h.gone, old)
		}
		h.goneIDs = append([]string(nil), h.goneIDs[goneKept:]...)
	}
}

// compact rewrites the index once most of it is removed commands' lines.
func (h *history) compact() {
	if h.index == nil || h.err != nil || h.size-h.live < max(h.live, 1<<20) {
		return
	}
	f, err := newIndex(h.dir)
	if err != nil {
		return // the old one still serves
	}
	var size int64
	for _, id := range h.order[h.first:] {
		e := h.entries[id]
		if e.k != nil {
			continue
		}
		line := make([]byte, e.n)
		if _, err := h.index.ReadAt(line, e.off); err != nil {
			_ = f.Close()
			return
		}
		if _, err := f.WriteAt(line, size); err != nil {
			_ = f.Close()
			return
		}
		e.off = size
		size += int64(e.n)
	}
	_ = h.index.Close()
	h.index, h.size, h.live = f, size, size
}

// read decodes e's index line.
func (h *history) read(e *entry) (record, error) {
	var r record
	line := make([]byte, e.n)
	if _, err := h.index.ReadAt(line, e.off); err != nil {
		return r, fmt.Errorf("history index: %w", err)
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("history index: %w", err)
	}
	return r, nil
}

// lookup is command id as it stands, from memory or the index.
func (h *history) lookup(id string) (*kept, bool) {
	e, ok := h.entries[id]
	if !ok {
		return nil, false
	}
	if e.k != nil {
		return e.k, true
	}
	r, err := h.read(e)
	if err != nil {
		return nil, false
	}
	out, errf := h.reopen(r.Stdout, r.StdoutBytes), h.reopen(r.Stderr, r.StderrBytes)
	if e.files != [2]*spool.File{} {
		out, errf = e.files[0], e.files[1]
	}
	return &kept{done: true, rec: shell.Record{
		ID: r.ID, Source: r.Source, Command: r.Command, Stdout: out, Stderr: errf,
		ExitCode: r.ExitCode, ExitKnown: r.ExitKnown, Started: r.Started, Duration: r.Duration, Cwd: r.Cwd,
		Merged: r.Merged, Viewer: r.Viewer, Unattributed: r.Unattributed, Interrupt: r.Interrupt,
		Repaired: r.Repaired, Redacted: r.Redacted, Blocked: r.Blocked,
	}}, true
}

// reopen is a stored stream, nil when it had no file.
func (h *history) reopen(name string, size int64) *spool.File {
	if name == "" {
		return nil
	}
	return h.dir.Reopen(name, size)
}

// reported marks the human's commands the gate delivered.
func (h *history) reported(recs []shell.Record) {
	for _, r := range recs {
		if e, ok := h.entries[r.ID]; ok {
			e.unreported = false
		}
	}
}

// Forgotten says why command id's output is gone, when it was removed to
// keep the session's outputs within their bound; ok is false for an id
// the session never kept (or removed too long ago to remember).
func (s *Session) Forgotten(id string) (Forgotten, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.hist.gone[id]
	return f, ok
}

// cappedSink keeps the first left bytes of a stream's exact copy: the
// sealed copy is bounded as the stream it shadows is (spool.Dir.MaxFile).
type cappedSink struct {
	shell.RawSink
	left int64
}

// capRaw bounds sink at max bytes; max <= 0: no bound.
func capRaw(sink shell.RawSink, max int64) shell.RawSink {
	if max <= 0 {
		return sink
	}
	return &cappedSink{RawSink: sink, left: max}
}

// Write keeps what fits and reports all of p written, as capture never
// fails.
func (c *cappedSink) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	if len(p) > 0 {
		c.left -= int64(len(p))
		_, _ = c.RawSink.Write(p)
	}
	return n, nil
}
