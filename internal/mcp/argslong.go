package mcp

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"unicode/utf8"
)

// An upload's content is one JSON string of up to 67 MB. encoding/json
// reads such a string several times over (the key checks' tokens unquote
// it, the decoder scans it and unquotes it again), about 0.7 s for a
// 50 MiB upload on a 2-core machine. decodeArgs takes long plain strings
// out of the arguments first, in one pass: the key checks and the decoder
// then run on the same arguments with "" in their place, and the strings
// are set afterwards. Only strings that mean exactly their bytes are
// taken out (no escape, no control character, valid UTF-8: what base64
// always is), so the result is the one encoding/json gives.

// longStringBytes is the least length of a string value taken out.
const longStringBytes = 64 << 10

// longString is one top-level string argument taken out of the raw
// arguments: the field it fills and its value.
type longString struct {
	field []int // the field's index in the arguments struct
	ptr   bool  // the field is a *string
	value string
}

// elideLong returns raw with the plain string values, least bytes or longer, of dst's string
// fields replaced by "", and the values taken out; raw unchanged and nil
// when there is none, or when raw is not an object it can read (the
// decoder then reports it as usual). Keys are matched exactly as spelled
// (escapes included): any other key is left where it is, for the key
// checks to judge.
func elideLong(raw []byte, dst any, least int) ([]byte, []longString) {
	t := reflect.TypeOf(dst)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return raw, nil
	}
	fields := stringFields(t.Elem())
	if len(fields) == 0 {
		return raw, nil
	}
	var out []longString
	var cuts [][2]int // the spans of raw, quotes excluded, to leave out
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return raw, nil
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return raw, nil
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return raw, nil
		}
		kEnd := skipString(raw, i)
		if kEnd < 0 {
			return raw, nil
		}
		key := raw[i+1 : kEnd-1]
		i = skipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return raw, nil
		}
		i = skipSpace(raw, i+1)
		if i >= len(raw) {
			return raw, nil
		}
		end := -1
		if raw[i] == '"' {
			if q := plainString(raw, i+1); q >= 0 {
				end = q + 1
				if f, ok := fields[string(key)]; ok && q-(i+1) >= least && bytes.IndexByte(key, '\\') < 0 {
					out = append(out, longString{field: f.index, ptr: f.ptr, value: string(raw[i+1 : q])})
					cuts = append(cuts, [2]int{i + 1, q})
				}
			} else {
				end = skipString(raw, i)
			}
		} else {
			end = skipValue(raw, i)
		}
		if end < 0 {
			return raw, nil
		}
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return raw, nil
		}
		if raw[i] == '}' {
			break
		}
		if raw[i] != ',' {
			return raw, nil
		}
		i = skipSpace(raw, i+1)
	}
	if len(out) == 0 {
		return raw, nil
	}
	small := make([]byte, 0, 4096)
	prev := 0
	for _, c := range cuts {
		small = append(small, raw[prev:c[0]]...)
		prev = c[1]
	}
	small = append(small, raw[prev:]...)
	return small, out
}

// setLong fills dst's fields with the strings taken out.
func setLong(dst any, long []longString) {
	v := reflect.ValueOf(dst).Elem()
	for _, l := range long {
		f := v.FieldByIndex(l.field)
		if l.ptr {
			s := l.value
			f.Set(reflect.ValueOf(&s))
		} else {
			f.SetString(l.value)
		}
	}
}

// stringField is a string or *string field of an arguments struct.
type stringField struct {
	index []int
	ptr   bool
}

// stringFields maps the JSON names of a struct's string and *string
// fields to them.
func stringFields(t reflect.Type) map[string]stringField {
	m := map[string]stringField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-", !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		switch {
		case f.Type.Kind() == reflect.String:
			m[name] = stringField{index: f.Index}
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.String:
			m[name] = stringField{index: f.Index, ptr: true}
		}
	}
	return m
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString returns the index of the quote that ends the string whose
// content starts at b[i] when the content means exactly its bytes (no
// backslash, no control character, valid UTF-8), else -1.
func plainString(b []byte, i int) int {
	q := bytes.IndexByte(b[i:], '"')
	if q < 0 {
		return -1
	}
	s := b[i : i+q]
	if bytes.IndexByte(s, '\\') >= 0 || hasControl(s) || !utf8.Valid(s) {
		return -1
	}
	return i + q
}

// hasControl reports whether b holds a byte below 0x20, eight bytes at a
// time.
func hasControl(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		// A byte below 0x20 borrows in w - 0x20 per byte and had its high
		// bit clear; bytes of 0x80 and up are left to utf8.Valid.
		if (w-ones*0x20)&^w&highs != 0 {
			for _, c := range b[:8] {
				if c < 0x20 {
					return true
				}
			}
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// skipString returns the index after the string that starts with the
// quote at b[i], or -1 if it does not end. Its content is not checked:
// it stays in the arguments, for the decoder to judge.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the value that is not a string and
// starts at b[i] (objects and arrays to their end), or -1. Like
// skipString it checks nothing but where the value ends.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			e := skipString(b, i)
			if e < 0 {
				return -1
			}
			i = e - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}
