package recording_test

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/recording"
)

// stalledDisk accepts the header, then blocks every write until released,
// as a full or hung disk would.
type stalledDisk struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  int
}

func (d *stalledDisk) Write(p []byte) (int, error) {
	d.mu.Lock()
	d.writes++
	first := d.writes == 1
	d.mu.Unlock()
	if !first {
		<-d.release
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.Write(p)
}

var lossMarker = regexp.MustCompile(`^\r\n\[tandem: recording lost ([0-9]+) bytes here\]\r\n$`)

func TestDropsWhileDiskStalls(t *testing.T) {
	disk := &stalledDisk{release: make(chan struct{})}
	w, err := recording.NewTestWriter(disk, recording.Header{Width: 80, Height: 24}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("x", 100)
	sent := 0
	for range 50 { // far more than 1024 bytes while the disk is stuck
		w.Output([]byte(chunk))
		sent += len(chunk)
	}
	for range 100 { // small events fill what room is left
		w.Output([]byte("y"))
		sent++
	}
	w.Input([]byte("typed"))
	sent += len("typed")
	w.Resize(50, 20) // dropped too, but written after the marker
	lost := w.Lost()
	if lost == 0 || lost >= int64(sent) {
		t.Fatalf("Lost() = %d of %d bytes sent, want some but not all", lost, sent)
	}

	close(disk.release)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Output([]byte("after the gap"))
	w.Output([]byte("; later")) // no second marker
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	_, events, err := recording.Read(&disk.buf)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var markers []int
	kept := 0
	for i, e := range events {
		m := lossMarker.FindStringSubmatch(e.Data)
		if e.Code != "o" || m == nil {
			kept += len(e.Data)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		markers = append(markers, n)
		if rest := events[i+1:]; len(rest) < 2 || rest[0] != (recording.Event{Time: e.Time, Code: "r", Data: "50x20"}) ||
			rest[1].Data != "after the gap" {
			t.Errorf("after the marker: %+v, want the resize that was dropped, then the next output", rest)
		}
	}
	if len(markers) != 1 || int64(markers[0]) != lost {
		t.Errorf("loss markers %v, want one saying %d bytes", markers, lost)
	}
	if want := sent - int(lost) + len("50x20after the gap; later"); kept != want {
		t.Errorf("kept %d bytes of events, want %d (sent %d, lost %d)", kept, want, sent, lost)
	}
}

func TestGapAtCloseIsMarked(t *testing.T) {
	disk := &stalledDisk{release: make(chan struct{})}
	w, err := recording.NewTestWriter(disk, recording.Header{Width: 80, Height: 24}, 10)
	if err != nil {
		t.Fatal(err)
	}
	w.Output([]byte("kept, alone over the limit"))
	w.Output([]byte("dropped"))
	close(disk.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, events, err := recording.Read(&disk.buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Data != "kept, alone over the limit" ||
		events[1].Data != "\r\n[tandem: recording lost 7 bytes here]\r\n" {
		t.Errorf("events = %q", events)
	}
}

// brokenDisk fails every write after the header.
type brokenDisk struct{ writes int }

var errDiskFull = errors.New("no space left on device")

func (d *brokenDisk) Write(p []byte) (int, error) {
	if d.writes++; d.writes > 1 {
		return 0, errDiskFull
	}
	return len(p), nil
}

func TestWriteErrorIsReported(t *testing.T) {
	w, err := recording.NewTestWriter(&brokenDisk{}, recording.Header{Width: 80, Height: 24}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	w.Output([]byte("lost"))
	if err := w.Flush(); !errors.Is(err, errDiskFull) {
		t.Errorf("Flush: %v, want %v", err, errDiskFull)
	}
	w.Output([]byte("ignored"))
	if err := w.Close(); !errors.Is(err, errDiskFull) {
		t.Errorf("Close: %v, want %v", err, errDiskFull)
	}
	if err := w.Flush(); !errors.Is(err, recording.ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
}
