package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// Redacted replaces the value of every secret key.
const Redacted = "[redacted]"

// unparseable stands in for arguments that are not one JSON value: they
// cannot be searched for secrets, so none of their bytes are kept.
const unparseable = `{"_unparseable":true}`

// Redact returns args with the value of every secret key, at any depth,
// replaced by "[redacted]". Secret keys are password, privateKey,
// passphrase and sessionToken, compared case-insensitively and ignoring
// '_' and '-' (so private_key counts). Input that is not exactly one JSON
// value becomes {"_unparseable":true}; empty input stays empty. The output
// is compact JSON with object keys sorted, so equal arguments are stored as
// equal bytes.
func Redact(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber() // keep 64-bit integers exact
	var v any
	if err := d.Decode(&v); err != nil {
		return json.RawMessage(unparseable)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return json.RawMessage(unparseable) // trailing data
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // keep "&&" in a command readable
	if err := enc.Encode(redact(v)); err != nil {
		return json.RawMessage(unparseable)
	}
	return bytes.TrimRight(out.Bytes(), "\n")
}

func redact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if isSecretKey(k) {
				v[k] = Redacted
			} else {
				v[k] = redact(x)
			}
		}
	case []any:
		for i, x := range v {
			v[i] = redact(x)
		}
	}
	return v
}

// isSecretKey reports whether k names a secret: ASCII case folded, '_' and
// '-' ignored. It runs for every key of every call, so it does not allocate.
func isSecretKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			return isSecretKeyFolded(k)
		}
	}
	var buf [16]byte
	n := 0
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || c == '-':
			continue
		case n == len(buf):
			return false // longer than any secret key
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case "password", "privatekey", "passphrase", "sessiontoken":
		return true
	}
	return false
}

// isSecretKey's path for non-ASCII keys: full Unicode case folding, so
// "paſſword" (U+017F) and "private\u212Aey" (Kelvin sign) count too.
func isSecretKeyFolded(k string) bool {
	k = strings.NewReplacer("_", "", "-", "").Replace(k)
	for _, name := range []string{"password", "privatekey", "passphrase", "sessiontoken"} {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
