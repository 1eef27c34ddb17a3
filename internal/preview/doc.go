// Package preview owns forwarded ports: a URL a person opens in a browser
// that proxies HTTP and WebSocket to a port the session listens on (the
// agent's dev server). It knows how to reach a port only as a dial
// function it is handed (the session's: inside a local session's network
// namespace, or a direct-tcpip channel over SSH), and nothing of MCP,
// policy, or who may look: the web layer decides that before it asks for
// a ticket.
//
// The dev server and its JavaScript are the agent's code, so a preview
// never runs on tandem's own origin, where that code could read the
// dashboard's API with the operator's cookie. Each forward gets a
// listener of its own (an origin of its own: on 127.0.0.1 without TLS a
// loopback address of its own, so no two previews share cookies; else the
// same host, another port):
//
//	browser ──GET /s/{key}/port/3000/──▶ tandem's origin (web)
//	   │         operator or admitted viewer? else 401/403
//	   │◀── 303 to http://host:P/.tandem-preview/enter?ticket=T ──┘  (Enter)
//	   ├──GET /.tandem-preview/enter?ticket=T──▶ forward's origin host:P
//	   │◀── Set-Cookie tpv_<id> (HttpOnly) + 303 to the path asked for
//	   └──GET /path (cookie)──▶ forward ──dial(port)──▶ the session's server
//
// A ticket is single-use and lives a minute; the cookie opens its own
// forward only (its name carries the forward's id, its value a secret of
// that forward). Browsers send cookies to every port of a host, so a
// forward strips tandem's cookies (tandem_*) and every forward's (tpv_*)
// from what it passes on, drops the upstream's Set-Cookie of those names,
// and serves nothing but the proxied app and its entry path. A Location
// that names the upstream (localhost:3000) is made relative, so redirects
// stay within the preview.
//
// Forwards end with their session (Open's done channel) or with the
// Manager; the Closed callback is told, for the audit. Start with
// [Manager.Open] and [Manager.Enter].
package preview
