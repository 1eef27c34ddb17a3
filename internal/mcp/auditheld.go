package mcp

import (
	"bytes"
	"encoding/json"

	"github.com/tandem-sh/tandem/internal/redact"
)

// auditHeld is a call's audited arguments with the credentials tandem
// holds for its session redacted in every string (session.Target's
// RedactHeld): a command the agent typed keeps its words, but a
// credential's secret, which the agent should not have, never reaches
// the audit log. Arguments that do not decode keep no byte.
func auditHeld(red *redact.Redactor, args json.RawMessage) json.RawMessage {
	if red == nil || len(args) == 0 {
		return args
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	v, changed := heldValue(red, v)
	if !changed {
		return args
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as audit.Redact keeps "&&" readable
	if enc.Encode(v) != nil {
		return json.RawMessage(`{"_unparseable":true}`)
	}
	return bytes.TrimRight(out.Bytes(), "\n")
}

// heldValue is v, decoded JSON, with its strings redacted by red, and
// whether any changed.
func heldValue(red *redact.Redactor, v any) (any, bool) {
	changed := false
	switch x := v.(type) {
	case string:
		s, n := red.String(x)
		return s, n != nil
	case map[string]any:
		for k, e := range x {
			if r, c := heldValue(red, e); c {
				x[k], changed = r, true
			}
		}
	case []any:
		for i, e := range x {
			if r, c := heldValue(red, e); c {
				x[i], changed = r, true
			}
		}
	}
	return v, changed
}
