// Package recording writes and reads session recordings in the asciicast v2
// format (https://docs.asciinema.org/manual/asciicast/v2/), so that every
// session can be played back with asciinema and replayed in the browser. It
// knows bytes, sizes and time only: nothing of shells, sessions, HTTP or MCP.
//
// A cast is one JSON header line, then one JSON event per line:
//
//	{"version":2,"width":120,"height":32,"timestamp":1700000000,"title":"build","env":{...}}
//	[0.000000, "o", "$ "]                  output shown to viewers
//	[0.512345, "i", "ls\r"]                input a human typed
//	[0.901000, "r", "100x40"]              resize to 100 columns, 40 rows
//
// Times are seconds since the recording started, from a monotonic clock, so
// they never decrease.
//
// # Writing without blocking
//
// [Writer] is fed by the terminal engine with the engine's lock held, so its
// Output, Input and Resize only copy into memory and return; a background
// goroutine encodes a burst once it pauses and writes it to disk. If the
// disk falls more than 4 MiB behind, the writer drops events rather than
// stall the shell or grow without bound, and when there is room again it
// writes a single output event
//
//	"\r\n[tandem: recording lost N bytes here]\r\n"
//
// where N counts the output and input bytes dropped, so a gap is visible in
// every player. [Writer.Lost] reports the total.
//
// [Writer.Cap] bounds the output and input a recording keeps in all: past
// it one output event says so and only markers and resizes follow.
//
// # UTF-8
//
// asciicast requires UTF-8, but a terminal's bytes need not be. The writer
// carries an incomplete UTF-8 sequence at the end of one Output (or Input)
// over to the next, so a character split across two reads stays whole, and
// replaces each byte that cannot be decoded with U+FFFD.
//
// Start with [Create] to record and [Read] to load a cast back.
package recording
