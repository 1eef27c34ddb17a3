package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"time"
	"unicode/utf8"
)

// ErrFormat is wrapped by the errors of [Read] for input that is not a valid
// asciicast v2 recording, and of [Create] for a header that would not make one.
var ErrFormat = errors.New("not a valid asciicast v2 recording")

// Header is the first line of a cast: the terminal it was recorded on.
type Header struct {
	// Version is always 2; Create sets it.
	Version int `json:"version"`
	// Width and Height are the terminal's columns and rows at the start.
	Width  int `json:"width"`
	Height int `json:"height"`
	// Timestamp is when the recording started, in Unix seconds.
	Timestamp int64 `json:"timestamp,omitempty"`
	// IdleTimeLimit, if positive, asks players to shorten pauses longer
	// than this many seconds. Zero keeps real timing.
	IdleTimeLimit float64 `json:"idle_time_limit,omitempty"`
	// Title names the recording in players, such as the session name.
	Title string `json:"title,omitempty"`
	// Env holds the TERM and SHELL the session ran with.
	Env map[string]string `json:"env,omitempty"`
}

// Event is one line of a cast after the header.
type Event struct {
	// Time is when it happened, since the recording started.
	Time time.Duration
	// Code says what Data is: "o" output, "i" input, "r" a resize to
	// "COLSxROWS", "m" a marker.
	Code string
	Data string
}

// sizeData is the data of a resize event.
var sizeData = regexp.MustCompile(`^[1-9][0-9]{0,5}x[1-9][0-9]{0,5}$`)

// maxSeconds keeps event times inside what a time.Duration holds.
const maxSeconds = float64(math.MaxInt64/int64(time.Second)) - 1

// Read parses a whole cast and checks it: version 2, a positive size, every
// event [time, code, data] with a known code, valid UTF-8, and times that
// never decrease. Errors wrap [ErrFormat] and name the line.
func Read(r io.Reader) (Header, []Event, error) {
	br := bufio.NewReader(r)
	var h Header
	var events []Event
	var last float64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			if n == 1 {
				return h, nil, fmt.Errorf("recording: read: empty: %w", ErrFormat)
			}
			return h, events, nil
		}
		if err != nil && err != io.EOF {
			return h, nil, fmt.Errorf("recording: read: %w", err)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if n == 1 {
			err = parseHeader(line, &h)
		} else {
			var e Event
			if e, last, err = parseEvent(line, last); err == nil {
				events = append(events, e)
			}
		}
		if err != nil {
			return h, nil, fmt.Errorf("recording: read: line %d: %w", n, err)
		}
	}
}

func parseHeader(line []byte, h *Header) error {
	if err := json.Unmarshal(line, h); err != nil {
		return fmt.Errorf("header: %w: %w", ErrFormat, err)
	}
	if h.Version != 2 {
		return fmt.Errorf("version %d: %w", h.Version, ErrFormat)
	}
	if h.Width <= 0 || h.Height <= 0 {
		return fmt.Errorf("terminal size %dx%d: %w", h.Width, h.Height, ErrFormat)
	}
	return nil
}

// parseEvent parses one event line whose time must be at least last, and
// returns it with its time in seconds.
func parseEvent(line []byte, last float64) (Event, float64, error) {
	if !utf8.Valid(line) {
		return Event{}, 0, fmt.Errorf("invalid UTF-8: %w", ErrFormat)
	}
	var fields []json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || len(fields) != 3 {
		return Event{}, 0, fmt.Errorf("event is not [time, code, data]: %w", ErrFormat)
	}
	var secs float64
	var e Event
	if json.Unmarshal(fields[0], &secs) != nil || json.Unmarshal(fields[1], &e.Code) != nil ||
		json.Unmarshal(fields[2], &e.Data) != nil {
		return Event{}, 0, fmt.Errorf("event is not [number, string, string]: %w", ErrFormat)
	}
	if secs < last || secs > maxSeconds {
		return Event{}, 0, fmt.Errorf("time %v after %v: %w", secs, last, ErrFormat)
	}
	switch e.Code {
	case "o", "i", "m":
	case "r":
		if !sizeData.MatchString(e.Data) {
			return Event{}, 0, fmt.Errorf("resize to %q: %w", e.Data, ErrFormat)
		}
	default:
		return Event{}, 0, fmt.Errorf("event code %q: %w", e.Code, ErrFormat)
	}
	e.Time = time.Duration(math.Round(secs * float64(time.Second)))
	return e, secs, nil
}
