package mcp

import (
	"encoding/json"
	"strings"

	"github.com/tandem-sh/tandem/internal/redact"
)

// A session's secrets reach its agent beside the output too: in the cwd of
// a result (a directory named after a secret), a program's argv held for
// approval, a host name the egress proxy refused, a command line a policy
// denied, the line a prompt waits at. Output is redacted as it is
// captured (internal/shell); everything else a reply carries is redacted
// here, once, as the handler renders it: every string of the reply,
// however deep, except the few below that tandem made itself or that hold
// output redacted already. A field added later is redacted without
// anyone remembering to.

// capturedKeys hold output redacted as it was captured, whose offsets and
// counts (stdoutBytes, stdoutRedacted, offset) refer to that text: they
// are never redacted again.
var capturedKeys = map[string]bool{
	"stdout": true, "stdoutTail": true, "stderr": true, "stderrTail": true,
	"data": true, "matches": true,
}

// madeKeys hold what tandem made and the agent must get back exactly:
// the stable codes, capabilities and resource addresses (random strings
// that redact's entropy rule would take for secrets). Keys named id or
// ending in Id (commandId, approvalId, outputId, requestId) are
// identifiers tandem made too.
var madeKeys = map[string]bool{
	"success": true, "error": true, "sessionToken": true, "monitoringUrl": true,
	"stdoutResource": true, "stderrResource": true, "uri": true, "sha256": true,
}

// keptKey reports whether the value under key passes unredacted.
func keptKey(key string) bool {
	return capturedKeys[key] || madeKeys[key] || key == "id" || strings.HasSuffix(key, "Id")
}

// redactReply returns r with every secret red finds in its strings
// replaced by a marker, but for the kept keys (keptKey). r itself, and
// anything it refers to, is never changed: what changed is copied. A nil
// red returns r. Should redaction fail, the reply is withheld, never sent
// as it was.
func redactReply(red *redact.Redactor, r reply) (out reply) {
	if red == nil || r == nil {
		return r
	}
	defer func() {
		if p := recover(); p != nil {
			out = fail(codeInternal, "tandem could not redact its reply, so it withholds it. Please report this.", nil).reply()
		}
	}()
	if v, changed := redactValue(red, r); changed {
		return v.(reply)
	}
	return r
}

// redactValue is v with its strings redacted, and whether any changed.
func redactValue(red *redact.Redactor, v any) (any, bool) {
	switch x := v.(type) {
	case string:
		s, n := red.String(x)
		return s, n != nil
	case reply:
		m, changed := redactMap(red, x)
		return reply(m), changed
	case map[string]any:
		return redactMap(red, x)
	case []any:
		return redactSlice(red, x)
	case []reply:
		return redactSlice(red, x)
	case []string:
		return redactSlice(red, x)
	case nil, bool, int, int64, float64, uint16:
		return v, false
	}
	// Anything else (a struct such as the sandbox's description) as the
	// agent will read it: its JSON.
	j, err := json.Marshal(v)
	if err != nil {
		return v, false
	}
	var decoded any
	if json.Unmarshal(j, &decoded) != nil {
		return v, false
	}
	if d, changed := redactValue(red, decoded); changed {
		return d, true
	}
	return v, false
}

// redactMap is redactValue for an object: a copy when anything changed.
func redactMap(red *redact.Redactor, m map[string]any) (map[string]any, bool) {
	var out map[string]any
	for k, v := range m {
		if keptKey(k) {
			continue
		}
		nv, changed := redactValue(red, v)
		if !changed {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
			for k2, v2 := range m {
				out[k2] = v2
			}
		}
		out[k] = nv
	}
	if out == nil {
		return m, false
	}
	return out, true
}

// redactSlice is redactValue for a list: a copy when anything changed.
// Its elements keep their type: E is any, reply or string, each of which
// redactValue returns as it came.
func redactSlice[E any](red *redact.Redactor, s []E) ([]E, bool) {
	var out []E
	for i, e := range s {
		nv, changed := redactValue(red, e)
		if !changed {
			continue
		}
		if out == nil {
			out = append([]E(nil), s...)
		}
		out[i], _ = nv.(E)
	}
	if out == nil {
		return s, false
	}
	return out, true
}
