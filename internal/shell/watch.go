package shell

import (
	"context"
	"sync"

	"github.com/tandem-sh/tandem/internal/term"
)

// liveBytes bounds the output kept for viewers to catch up on. All viewers
// of a shell read from the same ring, each at its own offset, so a hundred
// slow viewers cost what one does.
const liveBytes = 4 << 20

// viewerChunk is the most one viewer is handed at a time.
const viewerChunk = 64 << 10

// catchUp is what a viewer that fell behind the live ring is sent before a
// fresh snapshot of the scrollback: a terminal reset, so the snapshot
// redraws the screen instead of repeating what the viewer already shows.
const catchUp = "\x1bc"

// viewer is one Watch: a wake-up channel and whether the shell ended.
type viewer struct {
	mu     sync.Mutex
	ended  bool
	notify chan struct{}
}

// poke wakes the viewer; it never blocks.
func (v *viewer) poke() {
	select {
	case v.notify <- struct{}{}:
	default:
	}
}

func (v *viewer) end() {
	v.mu.Lock()
	v.ended = true
	v.mu.Unlock()
	v.poke()
}

func (v *viewer) isEnded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ended
}

// Watch replays the scrollback to fn, then streams live terminal output to
// it until ctx ends or the shell ends (both return nil), or fn fails. The
// shell never waits for a viewer: one that falls further behind than the
// live ring holds skips ahead, with a reset and a fresh scrollback snapshot.
// fn is called from this goroutine only.
func (s *Shell) Watch(ctx context.Context, fn func(p []byte) error) error {
	v := &viewer{notify: make(chan struct{}, 1)}
	s.mu.Lock()
	snapshot := s.scrollback.Snapshot()
	off := s.live.End()
	if s.err != nil {
		v.ended = true
	} else {
		s.viewers[v] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.viewers, v)
		s.mu.Unlock()
	}()
	if len(snapshot) > 0 {
		if err := fn(snapshot); err != nil {
			return err
		}
	}
	buf := make([]byte, viewerChunk)
	for {
		// Read before checking for the end, so the last output is delivered.
		ended := v.isEnded()
		n, ok := s.live.ReadAt(buf, off)
		switch {
		case !ok:
			s.mu.Lock()
			snapshot = append([]byte(catchUp), s.scrollback.Snapshot()...)
			off = s.live.End()
			s.mu.Unlock()
			if err := fn(snapshot); err != nil {
				return err
			}
			continue
		case n > 0:
			off += int64(n)
			if err := fn(buf[:n]); err != nil {
				return err
			}
			continue
		case ended:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-v.notify:
		}
	}
}

// newLive returns the shared ring viewers read from.
func newLive() *term.Ring { return term.NewRing(liveBytes) }
