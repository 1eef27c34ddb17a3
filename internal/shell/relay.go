package shell

import "bytes"

// frame is what a relay stream carries between two markers.
type frameKind int

const (
	frameData frameKind = iota
	frameBegin
	frameEnd
	frameDrop
)

// frameScanner splits one relay stream (agent stdout or stderr) at the
// begin and end markers that integration.bash writes around each agent
// command. The markers carry the nonce, so command output cannot forge them.
//
// It also drops the command-start mark: bash prints PS0 to stderr, so for a
// multi-line agent command the later lines' marks land in the relay.
type frameScanner struct {
	markers [3][]byte // indexed by frameKind-1
	pending []byte
}

func newFrameScanner(nonce string) *frameScanner {
	return &frameScanner{markers: [3][]byte{
		[]byte("\x1b]633;X;bom;n=" + nonce + "\x07"),
		[]byte("\x1b]633;X;eom;n=" + nonce + "\x07"),
		[]byte("\x1b]133;C;n=" + nonce + "\x07"),
	}}
}

// feed splits b into data and markers, in order. Bytes that may be the start
// of a marker are held back until the next call decides.
func (f *frameScanner) feed(b []byte, emit func(frameKind, []byte)) {
	f.pending = append(f.pending, b...)
	for {
		i, kind := -1, frameData
		for k, m := range f.markers {
			if j := bytes.Index(f.pending, m); j >= 0 && (i < 0 || j < i) {
				i, kind = j, frameKind(k+1)
			}
		}
		if i < 0 {
			break
		}
		if i > 0 {
			emit(frameData, f.pending[:i])
		}
		emit(kind, nil)
		f.pending = f.pending[i+len(f.markers[kind-1]):]
	}
	keep := markerPrefixLen(f.pending, f.markers[:]...)
	if len(f.pending) > keep {
		emit(frameData, f.pending[:len(f.pending)-keep])
		f.pending = append(f.pending[:0], f.pending[len(f.pending)-keep:]...)
	}
}

// markerPrefixLen is the length of the longest suffix of b that is a proper
// prefix of one of the markers.
func markerPrefixLen(b []byte, markers ...[]byte) int {
	best := 0
	for _, m := range markers {
		for n := min(len(b), len(m)-1); n > best; n-- {
			if bytes.HasSuffix(b, m[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

// toCRLF converts bare LF to CR LF, as a terminal's onlcr would, so relay
// output (which never passed through the tty) displays right for viewers.
func toCRLF(dst, src []byte) []byte {
	for len(src) > 0 {
		i := bytes.IndexByte(src, '\n')
		if i < 0 {
			return append(dst, src...)
		}
		dst = append(dst, src[:i]...)
		if i == 0 || src[i-1] != '\r' {
			dst = append(dst, '\r')
		}
		dst = append(dst, '\n')
		src = src[i+1:]
	}
	return dst
}
