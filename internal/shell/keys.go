package shell

import (
	"bytes"
	"context"
	"time"
)

// The keys of viewer input that the shell's bookkeeping follows. A viewer's
// Enter may start one human command; Ctrl-C, Ctrl-Z and Ctrl-\ interrupt
// the running one. Bytes inside a bracketed paste are text: readline puts
// them on the line, and only the Enter after the paste submits it.

var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// credit is one Enter key a viewer sent that no line of the shell's has
// used yet: it may start one human command, or one continuation line.
type credit struct {
	viewer string
	at     time.Time
	seq    uint64 // the order it reached the terminal in (Shell.creditSeq)
}

// keyScan is what one piece of viewer input holds, as the shell reads it.
type keyScan struct {
	enters int    // line ends outside bracketed pastes
	intr   string // the last interrupt key, "Ctrl-C", "Ctrl-Z" or "Ctrl-\", if any
	eof    bool   // a Ctrl-D outside a paste
}

// keyScanner follows bracketed paste across input messages: a paste may
// arrive in many pieces, and its markers split between them.
type keyScanner struct {
	inPaste bool
	tail    []byte // the end of the last input, which may start a marker
}

// scan reads one piece of viewer input.
func (k *keyScanner) scan(p []byte) keyScan {
	var ks keyScan
	// A held marker prefix holds no key that counts.
	b := append(k.tail, p...)
	k.tail = nil
	for i := 0; i < len(b); i++ {
		if b[i] == 0x1b {
			rest := b[i:]
			switch {
			case bytes.HasPrefix(rest, pasteStart):
				k.inPaste = true
				i += len(pasteStart) - 1
				continue
			case bytes.HasPrefix(rest, pasteEnd):
				k.inPaste = false
				i += len(pasteEnd) - 1
				continue
			case len(rest) < len(pasteStart) && (bytes.HasPrefix(pasteStart, rest) || bytes.HasPrefix(pasteEnd, rest)):
				// A marker may continue in the next piece.
				k.tail = bytes.Clone(rest)
				return ks
			}
		}
		if k.inPaste {
			continue // pasted text
		}
		switch b[i] {
		case '\r', '\n':
			ks.enters++
		case 0x03:
			ks.intr = "Ctrl-C"
		case 0x1a:
			ks.intr = "Ctrl-Z"
		case 0x1c:
			ks.intr = `Ctrl-\`
		case 0x04:
			ks.eof = true
		}
	}
	return ks
}

type viewerKey struct{}

// WithViewer names, for the shell's records, who sends the input made with
// ctx (a browser viewer, tandem attach): each human command records the
// viewer whose Enter started it.
func WithViewer(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, viewerKey{}, name)
}

// viewerFrom is the name WithViewer gave ctx, or "viewer".
func viewerFrom(ctx context.Context) string {
	if v, ok := ctx.Value(viewerKey{}).(string); ok && v != "" {
		return v
	}
	return "viewer"
}
