package web_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/web"
)

// madeByTandem are the strip's strings that no session influences: the
// agent's state, a command's source, an approval's id, who watches, a
// forwarded port's link.
var madeByTandem = map[string]bool{"Agent": true, "Source": true, "ID": true, "Watchers": true, "URL": true}

// TestStatusRedacted: SessionStatus.Redacted applies its function to
// every string of the status a session can influence, found by
// reflection, so that a field added later fails here until Redacted
// covers it (or it is listed in madeByTandem); the status handed in is
// not changed.
func TestStatusRedacted(t *testing.T) {
	const secret = "SECRET"
	code := 1
	st := web.SessionStatus{Agent: "running", Command: "cat " + secret, Since: time.Now(), Gate: 1,
		Approvals: []web.StripAction{{ID: "apr_1", Tool: "network", Command: "connect " + secret + ".example:80", Rule: "network.ask"}},
		Held:      []web.StripAction{{ID: "apr_2", Tool: "ssh_exec", Command: "make " + secret, Rule: "rules[1]", Expires: time.Now()}},
		Denied:    []web.StripAction{{Tool: "ssh_exec", Command: "rm " + secret, Rule: "rules[0] " + secret}},
		Viewers:   1, Watchers: []string{"operator"},
		Commands: []web.StripCommand{{ID: "cmd_1", Source: "human", Command: "cd " + secret, Exit: &code}},
		Network:  []web.StripConnection{{Target: secret + ".example:443", Decision: "refused", Reason: "not on " + secret}},
		Ports:    []web.StripPort{{Port: 3000, URL: "/s/key/port/3000/"}},
	}
	// Every string field holds the secret, so a field Redacted forgets
	// shows up below.
	fill(reflect.ValueOf(&st).Elem(), secret)
	before := dump(reflect.ValueOf(st))
	got := st.Redacted(func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") })
	check(t, reflect.ValueOf(got), "SessionStatus", secret)
	if after := dump(reflect.ValueOf(st)); after != before {
		t.Errorf("Redacted changed the status it was handed:\n%s\nwas\n%s", after, before)
	}
}

// fill appends secret to every string a session could influence in v.
func fill(v reflect.Value, secret string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if !madeByTandem[v.Type().Field(i).Name] {
				fill(v.Field(i), secret)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			fill(v.Index(i), secret)
		}
	case reflect.String:
		if !strings.Contains(v.String(), secret) {
			v.SetString(v.String() + " " + secret)
		}
	}
}

// check fails t for every string in v that still holds secret.
func check(t *testing.T, v reflect.Value, path, secret string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); !madeByTandem[f.Name] {
				check(t, v.Field(i), path+"."+f.Name, secret)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s is empty: the test fills every list", path)
		}
		for i := range v.Len() {
			check(t, v.Index(i), path+"[]", secret)
		}
	case reflect.String:
		if strings.Contains(v.String(), secret) {
			t.Errorf("%s = %q still holds the secret", path, v.String())
		}
	}
}

// dump is every string in v, for comparing a value before and after.
func dump(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Struct:
		var b strings.Builder
		for i := range v.NumField() {
			b.WriteString(dump(v.Field(i)) + "|")
		}
		return b.String()
	case reflect.Slice:
		var b strings.Builder
		for i := range v.Len() {
			b.WriteString(dump(v.Index(i)) + ",")
		}
		return b.String()
	case reflect.String:
		return v.String()
	}
	return ""
}
