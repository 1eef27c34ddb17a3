package web

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
)

// A recording's input events ("i") are what people typed: command lines,
// and whatever a prompt that echoed took. The monitoring link is a
// capability the agent holds too, so only the signed-in operator is
// served them; anyone else gets the cast without them, which replays the
// same, since the screen shows what the terminal echoed.

// operatorRequest reports whether r carries the operator's sign-in: the
// dashboard's cookie, or its token as a bearer token (tandem attach). With
// no operator configured, no request does.
func (s *Server) operatorRequest(r *http.Request) bool {
	if s.operator == nil {
		return false
	}
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(got) {
		return true
	}
	return s.signedIn(r)
}

// serveCastWithoutInput sends the recording in f without its input
// events. The length is not known ahead, so ranges are not served: the
// whole file is sent.
func (s *Server) serveCastWithoutInput(w http.ResponseWriter, r *http.Request, f io.Reader) {
	hd := w.Header()
	hd.Set("Content-Type", castType)
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if err := copyWithoutInput(w, f); err != nil {
		s.log.Debug("web: recording cut short", "err", err)
	}
}

// castReadSize is the read buffer of copyWithoutInput; an event's code is
// always within its first bytes.
const castReadSize = 64 << 10

// copyWithoutInput copies an asciicast v2 stream from src to dst, leaving
// out every input event line, [TIME, "i", DATA]; the header and the other
// events pass unchanged, however long. A last line without a newline (a
// recording cut short) is treated the same.
func copyWithoutInput(dst io.Writer, src io.Reader) error {
	br := bufio.NewReaderSize(src, castReadSize)
	for {
		line, err := br.ReadSlice('\n')
		keep := !inputEvent(line)
		for {
			if keep && len(line) > 0 {
				if _, werr := dst.Write(line); werr != nil {
					return werr
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
			line, err = br.ReadSlice('\n') // the rest of a long line
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// inputEvent reports whether line starts an input event: '[', the time (a
// number, so no comma), ',', then the code "i". Any other line, the
// header included, is not one.
func inputEvent(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(line, " \t"), []byte("["))
	if !ok {
		return false
	}
	comma := bytes.IndexByte(rest, ',')
	if comma < 0 {
		return false
	}
	return bytes.HasPrefix(bytes.TrimLeft(rest[comma+1:], " \t\r\n"), []byte(`"i"`))
}
