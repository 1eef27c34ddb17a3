package main

import "fmt"

// refusedTargets lists "host:port" for each connection a reply's
// networkRefused names (a redacted host keeps its marker unbracketed).
func refusedTargets(res map[string]any) []string {
	refused, _ := res["networkRefused"].([]any)
	var out []string
	for _, r := range refused {
		m, _ := r.(map[string]any)
		port, _ := m["port"].(float64)
		out = append(out, fmt.Sprintf("%s:%d", str(m["host"]), int(port)))
	}
	return out
}
