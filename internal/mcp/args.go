package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/tandem-sh/tandem/internal/audit"
)

// decodeArgs unmarshals a tool's raw arguments into dst strictly: unknown
// fields and wrong types are refused with an invalid_arguments reply that
// names the field, so a typo can never silently drop a parameter.
func decodeArgs(raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	return decodeEliding(raw, dst, longStringBytes)
}

// decodeEliding decodes with the plain string arguments of least bytes or
// more taken out first (see elideLong).
func decodeEliding(raw json.RawMessage, dst any, least int) error {
	if small, long := elideLong(raw, dst, least); long != nil {
		if decodeStrict(small, dst) == nil {
			setLong(dst, long)
			return nil
		}
		// Refused: judged again whole, so the reply is word for word the
		// one without elision (byte offsets included).
		reflect.ValueOf(dst).Elem().SetZero()
	}
	return decodeStrict(raw, dst)
}

// decodeStrict is decodeArgs on arguments as they are.
func decodeStrict(raw json.RawMessage, dst any) error {
	if err := uniqueKeys(raw); err != nil {
		return err
	}
	if err := exactKeys(raw, dst); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the arguments object")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalidArg(typeErr.Field, "must be a %s, not a JSON %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &typeErr):
		return fail(codeInvalidArguments, "Arguments must be a JSON object.", reply{"field": ""})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidArg(field, "is not a parameter of this tool; check the spelling against the tool's input schema")
	case errors.As(err, &syntaxErr):
		return fail(codeInvalidArguments, fmt.Sprintf("Arguments are not valid JSON (at byte %d): %v.", syntaxErr.Offset, err), reply{"field": ""})
	}
	return fail(codeInvalidArguments, "Arguments could not be read: "+err.Error()+".", reply{"field": ""})
}

// exactKeys refuses a top-level key that is not spelled exactly as one of
// dst's JSON names, and a key given twice. encoding/json alone matches keys
// case-insensitively, with Unicode folding: "paſſword" (U+017F) would fill
// Password and slip past every check that looks at key names. Anything
// that is not an object is left to the decoder to report.
func exactKeys(raw json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	names := jsonNames(reflect.TypeOf(dst).Elem())
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := tok.(string)
		switch {
		case seen[k]:
			return invalidArg(k, "is given more than once; send each parameter once")
		case !names[k]:
			return invalidArg(k, "is not a parameter of this tool; check the spelling, case included, against the tool's input schema")
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// uniqueKeys refuses, at any depth, an object that names a key twice or
// two keys that are equal under Unicode case folding ("command" and
// "Command"). Decoders disagree on which of them wins (encoding/json's
// struct decoding folds case, a map or JavaScript keeps the exact key,
// and each keeps the last or the first duplicate), so what tandem judges
// could differ from what a client later reads. The field named is the
// path of the second key, e.g. input.Command. Input that is not valid
// JSON is left to the decoder to report.
func uniqueKeys(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	err := walkKeys(dec, "", 0)
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	return nil
}

// maxDepth is encoding/json's own nesting limit: deeper input is refused
// by the decoder, and walkKeys does not recurse past it.
const maxDepth = 10000

// errTooDeep ends a walk at maxDepth, for the decoder to report.
var errTooDeep = errors.New("nested too deeply")

// walkKeys reads one JSON value from dec, checking the keys of every
// object in it; path names the value. A syntax error ends the walk
// (returned as is, for the caller to leave to the decoder).
func walkKeys(dec *json.Decoder, path string, depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{} // folded key -> the key as given
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			field := k
			if path != "" {
				field = path + "." + k
			}
			switch prev, dup := seen[foldKey(k)]; {
			case dup && prev == k:
				return invalidArg(field, "is given more than once; send each key once")
			case dup:
				return invalidArg(field, "collides with %q: keys that differ only in case are refused, as decoders disagree on which one counts", prev)
			}
			seen[foldKey(k)] = k
			if err := walkKeys(dec, field, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // }
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
		return err
	}
	return nil
}

// foldKey maps a key to one representative of its case-folding class:
// each rune becomes the smallest rune of its Unicode simple-folding orbit,
// so "Command", "command" and "commaNd" (and "ſ" and "s", "K" and "k")
// fold alike.
func foldKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// jsonNames lists the JSON names of a struct type's fields.
func jsonNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case name != "":
			names[name] = true
		case f.IsExported():
			names[f.Name] = true
		}
	}
	return names
}

// auditArgs is what the audit log keeps of a call's arguments. Once the
// arguments decoded, every key is exactly a parameter name, so redaction by
// key name is sound; arguments that did not decode keep their keys only.
func auditArgs(raw json.RawMessage, decoded bool) json.RawMessage {
	if decoded {
		return audit.Redact(raw)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return json.RawMessage(`{"_unparseable":true}`) // keep no byte of it
	}
	keys := make(map[string]string, len(m))
	for k := range m {
		keys[k] = audit.Redacted
	}
	b, _ := json.Marshal(keys)
	return b
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int64", "float64":
		return "number"
	}
	return goKind
}

// require refuses a missing or empty string parameter.
func require(field, v string) error {
	if v == "" {
		return invalidArg(field, "is required")
	}
	return nil
}

// maskInput replaces the input argument of audited arguments by its size:
// keys typed at a prompt that hides them are secrets.
func maskInput(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	if v, ok := m["input"]; ok {
		var in string
		_ = json.Unmarshal(v, &in)
		m["input"], _ = json.Marshal(fmt.Sprintf("[hidden: %d bytes typed where the terminal does not echo]", len(in)))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	return b
}
