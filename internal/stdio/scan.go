package stdio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// lineScan is what Check needs of a line, read in one pass: whether it is
// valid JSON (as json.Valid judges it), nested at most MaxDepth, an
// object, and the raw values of the members a JSON-RPC message has. A
// 67 MB upload is read once here, where json.Valid and json.Unmarshal
// into a map read it three times over.
type lineScan struct {
	b       []byte
	i       int
	depth   int
	valid   bool
	tooDeep bool // nesting passed MaxDepth before anything was found invalid
	object  bool // the value is an object
	top     members
	// each, if set, is called with every top-level member (the key's
	// token and the value) instead of filling top.
	each func(key, val []byte)
}

// members are the raw values of a message's members, nil when absent.
// A key given twice counts the last time, as in json.Unmarshal.
type members struct {
	id, jsonrpc, method, params, result, error []byte
}

// scanLine reads b once.
func scanLine(b []byte) *lineScan {
	s := &lineScan{b: b}
	s.space()
	s.object = s.i < len(b) && b[s.i] == '{'
	s.valid = s.value() && s.end()
	return s
}

func (s *lineScan) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *lineScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one value at s.i (no space before it).
func (s *lineScan) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.obj()
	case c == '[':
		return s.arr()
	case c == '"':
		return s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	}
	return false
}

func (s *lineScan) lit(w string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		return false
	}
	s.i += len(w)
	return true
}

func (s *lineScan) enter() bool {
	s.depth++
	if s.depth > MaxDepth {
		s.tooDeep = true
		return false
	}
	s.i++
	s.space()
	return true
}

func (s *lineScan) obj() bool {
	if !s.enter() {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		k := s.i
		if !s.str() {
			return false
		}
		key := s.b[k:s.i]
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		v := s.i
		if !s.value() {
			return false
		}
		switch {
		case s.depth == 1 && s.each != nil:
			s.each(key, s.b[v:s.i])
		case s.depth == 1:
			s.member(key, s.b[v:s.i])
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

func (s *lineScan) arr() bool {
	if !s.enter() {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// member keeps a top-level member's value if Check looks at its key.
// key is the whole string token, quotes included.
func (s *lineScan) member(key, v []byte) {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
		var k string
		if json.Unmarshal(key, &k) != nil {
			return
		}
		name = []byte(k)
	}
	switch string(name) {
	case "id":
		s.top.id = v
	case "jsonrpc":
		s.top.jsonrpc = v
	case "method":
		s.top.method = v
	case "params":
		s.top.params = v
	case "result":
		s.top.result = v
	case "error":
		s.top.error = v
	}
}

// str reads a string token at s.i, eight bytes at a time while none of
// them is a quote, a backslash or a control character.
func (s *lineScan) str() bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b, i := s.b, s.i+1
	for {
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			q, bs := w^(ones*'"'), w^(ones*'\\')
			if ((q-ones)&^q|(bs-ones)&^bs|(w-ones*0x20)&^w)&highs != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return false
				}
				for _, h := range b[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			i++
		}
	}
}

func (s *lineScan) number() bool {
	b, i := s.b, s.i
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	s.i = i
	return true
}
