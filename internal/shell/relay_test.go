package shell

import (
	"bytes"
	"testing"
)

const testNonce = "0123456789abcdef0123456789abcdef"

type frame struct {
	kind frameKind
	data string
}

// scan feeds pieces and returns the frames with adjacent data merged.
func scan(pieces ...[]byte) []frame {
	fs := newFrameScanner(testNonce)
	var out []frame
	for _, p := range pieces {
		fs.feed(p, func(k frameKind, b []byte) {
			if k == frameData && len(out) > 0 && out[len(out)-1].kind == frameData {
				out[len(out)-1].data += string(b)
				return
			}
			out = append(out, frame{k, string(b)})
		})
	}
	return out
}

func TestFrameScanner(t *testing.T) {
	fs := newFrameScanner(testNonce)
	bom, eom, c := string(fs.markers[0]), string(fs.markers[1]), string(fs.markers[2])
	tests := []struct {
		in   string
		want []frame
	}{
		{"late" + bom + "out\x00\xff" + eom, []frame{{frameData, "late"}, {frameBegin, ""}, {frameData, "out\x00\xff"}, {frameEnd, ""}}},
		{bom + "a" + c + "b" + eom, []frame{{frameBegin, ""}, {frameData, "a"}, {frameDrop, ""}, {frameData, "b"}, {frameEnd, ""}}},
		{bom + "\x1b]633;X;eom;n=deadbeef\x07" + eom, []frame{{frameBegin, ""}, {frameData, "\x1b]633;X;eom;n=deadbeef\x07"}, {frameEnd, ""}}},
		{bom + "\x1b]633;X;eo", []frame{{frameBegin, ""}}}, // a possible marker start is held back
	}
	for _, tc := range tests {
		got := scan([]byte(tc.in))
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: frame %d = %v, want %v", tc.in, i, got[i], tc.want[i])
			}
		}
		// Byte by byte gives the same frames.
		var pieces [][]byte
		for i := range len(tc.in) {
			pieces = append(pieces, []byte{tc.in[i]})
		}
		if bb := scan(pieces...); len(bb) != len(got) {
			t.Errorf("%q byte by byte: %v", tc.in, bb)
		}
	}
}

func TestToCRLF(t *testing.T) {
	for in, want := range map[string]string{"a\nb\n": "a\r\nb\r\n", "a\r\nb": "a\r\nb", "\n": "\r\n", "": ""} {
		if got := string(toCRLF(nil, []byte(in))); got != want {
			t.Errorf("toCRLF(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzFrames(f *testing.F) {
	fs := newFrameScanner(testNonce)
	f.Add([]byte("x"+string(fs.markers[0])+"payload"+string(fs.markers[1])+"y"), 5)
	f.Add([]byte("\x1b]633;X;bom;n="+testNonce), 3)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		if len(in) == 0 {
			return
		}
		cut = ((cut % len(in)) + len(in)) % len(in)
		whole, split := scan(in), scan(in[:cut], in[cut:])
		if len(whole) != len(split) {
			t.Fatalf("split at %d changed the frames: %v vs %v", cut, whole, split)
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("split at %d: frame %d %v vs %v", cut, i, whole[i], split[i])
			}
		}
		// With the stream closed by a marker (as the shell always does), the
		// data is exactly the input with the markers removed, in order.
		closed := append(bytes.Clone(in), fs.markers[1]...)
		var data bytes.Buffer
		for _, fr := range scan(closed) {
			data.WriteString(fr.data)
		}
		want := closed
		for _, m := range fs.markers {
			want = bytes.ReplaceAll(want, m, nil)
		}
		if !bytes.Equal(data.Bytes(), want) {
			t.Fatalf("data %q, want %q", data.Bytes(), want)
		}
	})
}
