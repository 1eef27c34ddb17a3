package shell

import (
	"context"
	"errors"
	"sync"
)

// maxViewerBacklog bounds what one slow viewer may fall behind before it
// is dropped; the shell never waits for a viewer.
const maxViewerBacklog = 8 << 20

// ErrViewerTooSlow ends a Watch whose viewer fell too far behind.
var ErrViewerTooSlow = errors.New("viewer fell too far behind the terminal")

type viewer struct {
	mu       sync.Mutex
	queue    [][]byte
	size     int
	ended    bool
	overflow bool
	notify   chan struct{}
}

func (v *viewer) send(p []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ended {
		return
	}
	v.size += len(p)
	if v.size > maxViewerBacklog {
		v.ended, v.overflow, v.queue = true, true, nil
	} else {
		v.queue = append(v.queue, append([]byte(nil), p...))
	}
	v.poke()
}

func (v *viewer) end() {
	v.mu.Lock()
	v.ended = true
	v.poke()
	v.mu.Unlock()
}

func (v *viewer) poke() {
	select {
	case v.notify <- struct{}{}:
	default:
	}
}

func (v *viewer) take() (q [][]byte, ended, overflow bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	q, v.queue, v.size = v.queue, nil, 0
	return q, v.ended, v.overflow
}

// Watch replays the scrollback to fn, then streams live terminal output to
// it until ctx ends (returns nil), the shell ends (nil) or the viewer falls
// too far behind (ErrViewerTooSlow). fn is called from this goroutine only.
func (s *Shell) Watch(ctx context.Context, fn func(p []byte) error) error {
	v := &viewer{notify: make(chan struct{}, 1)}
	s.mu.Lock()
	v.queue = [][]byte{s.scrollback.Snapshot()}
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
	for {
		q, ended, overflow := v.take()
		for _, p := range q {
			if len(p) == 0 {
				continue
			}
			if err := fn(p); err != nil {
				return err
			}
		}
		switch {
		case overflow:
			return ErrViewerTooSlow
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
