package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// decodeArgs unmarshals a tool's raw arguments into dst strictly: unknown
// fields and wrong types are refused with an invalid_arguments reply that
// names the field, so a typo can never silently drop a parameter.
func decodeArgs(raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
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
