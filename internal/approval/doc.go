// Package approval holds the actions that wait for a human: a pending
// approval per (session, action) fingerprint, the first answer to it, and
// the agent's repeat of the identical call that picks that answer up.
//
//	policy says ask ──▶ Request ──▶ pending ──▶ Decide (dashboard, client,
//	                      │          upstream) or the timeout
//	                      └── waits up to Wait, else "pending: repeat the call"
//
// An approval runs its fingerprint once, in its session; "remember for N
// minutes" allows the same fingerprint again in that session only. The
// package knows nothing of MCP, shells or HTTP: it is told what an action
// is, and a Journal makes requests and decisions durable.
package approval
