// Package cluster lets tandem nodes that share one PostgreSQL store act as
// one service behind a load balancer with no sticky sessions. A session's
// shell lives on the node that created it; a call, a monitoring page or
// its WebSocket that reaches another node is forwarded to that owner over
// HTTP, signed with the cluster secret, and the owner's answer comes back
// unchanged.
//
//	client ──▶ node B ──(session on A?)──▶ signed request ──▶ node A
//	                                                    claims checked again
//
// The receiving node checks the bearer claim before it reads or forwards
// anything, and the owner checks it again: the owner trusts the signature
// only for where the request came from, never for who the caller is. A
// signature names the node it is for and its nonce is accepted once, so a
// captured request replays to no node.
package cluster
