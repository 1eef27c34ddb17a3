package mcp_test

import (
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/preview"
)

// TestGoldenPorts pins ssh_forward_port's and ssh_list_ports' replies: a
// port nothing listens on yet (forwarded, listening false), the same port
// again, the list, a bad port, the session's limit, and a tandem without
// previews. Each validates against the tool's output schema.
func TestGoldenPorts(t *testing.T) {
	previews := preview.New(&preview.Options{MaxPerSession: 1})
	t.Cleanup(func() { previews.Close() })
	f := newServerWith(t, 64, func(d *mcp.Deps) { d.Previews = previews })
	c := f.client(t)
	valid := schemas(t, c)
	s := connect(t, c, "ports")
	args := func(port any) map[string]any {
		m := map[string]any{"sessionName": s.Name, "sessionToken": s.Token}
		if port != nil {
			m["port"] = port
		}
		return m
	}
	// The URL names the session's monitoring key.
	url := func(r map[string]any) map[string]any {
		for _, v := range []any{r, r["ports"]} {
			switch x := v.(type) {
			case map[string]any:
				if u, ok := x["url"].(string); ok && strings.HasPrefix(u, "http://127.0.0.1:1/s/") && strings.HasSuffix(u, "/port/1/") {
					x["url"] = "<url>"
				}
			case []any:
				for _, p := range x {
					m := p.(map[string]any)
					m["url"], m["openedAt"] = "<url>", "<openedAt>"
				}
			}
		}
		return r
	}
	for _, st := range []struct {
		name, tool string
		args       map[string]any
	}{
		{"forward_port_ok", "ssh_forward_port", args(1)},
		{"forward_port_again", "ssh_forward_port", args(1)},
		{"list_ports", "ssh_list_ports", args(nil)},
		{"forward_port_invalid_arguments", "ssh_forward_port", args(0)},
		{"forward_port_missing_port", "ssh_forward_port", args(nil)},
		{"forward_port_limit", "ssh_forward_port", args(2)},
		{"forward_port_invalid_token", "ssh_forward_port", map[string]any{"sessionName": s.Name, "sessionToken": "nope", "port": 1}},
	} {
		r := c.Call(t, st.tool, st.args)
		valid(st.tool, r)
		golden(t, st.name, url(r))
	}

	bare := newServer(t, 64).client(t)
	bs := connect(t, bare, "noprev")
	r := bare.Call(t, "ssh_forward_port", map[string]any{"sessionName": bs.Name, "sessionToken": bs.Token, "port": 3000})
	golden(t, "forward_port_unavailable", r)
	if got := mcptest.MustOK(t, bare.Call(t, "ssh_list_ports", map[string]any{"sessionName": bs.Name, "sessionToken": bs.Token}))["ports"]; len(got.([]any)) != 0 {
		t.Errorf("a tandem without previews lists %v", got)
	}
}
