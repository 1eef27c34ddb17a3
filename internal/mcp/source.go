package mcp

// sourceName is how a reply names who ran a command: "agent" or "human",
// as interruptedBy, the audit and the monitoring page name them. The
// session layer's records say "user" for the human.
func sourceName(source string) string {
	if source == "user" {
		return "human"
	}
	return source
}
