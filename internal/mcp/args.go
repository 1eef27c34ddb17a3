package mcp

import (
	"bytes"
	"reflect"

	"encoding/json"
	"errors"
	"fmt"
	"github.com/tandem-sh/tandem/internal/audit"
	"strings"
)

// decodeArgs unmarshals a tool's raw arguments into dst strictly: unknown
// fields and wrong types are refused with an invalid_arguments reply that
// names the field, so a typo can never silently drop a parameter.
func decodeArgs(raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
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
