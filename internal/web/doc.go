// Package web serves the browser terminal: the page a monitoring URL opens,
// where a human watches a live shell session and types into it.
//
// It owns HTTP routes, the WebSocket protocol between page and server, and the
// embedded assets (plain HTML, CSS and JS plus a vendored xterm.js). It does not
// know how sessions are made, owned or run: it reaches them only through the
// [Sessions] and [Terminal] interfaces, which the session layer implements.
//
//	browser ──GET /s/{key}────▶ page (escaped name, strict headers)
//	        ──GET /s/{key}/ws─▶ Sessions.Terminal(key)
//	        ◀── binary: scrollback, then live bytes ── Terminal.Watch
//	        ─── text: {"t":"i","d":"ls\r"} ───────────▶ Terminal.Input
//	        ─── text: {"t":"r","c":120,"r":40} ───────▶ Terminal.Resize
//	        ◀── close 1000 "session ended" when Watch returns
//
// The key in the path is a capability: whoever holds the URL may watch and
// type, with no other login. So the server never puts the key anywhere but
// the URL itself (Referrer-Policy no-referrer, no-store caching), answers an
// unknown key with the same 404 as any unknown path, accepts WebSocket
// upgrades only from its own origin, and [Listen] binds loopback unless told
// otherwise out loud.
//
// Start with [Listen], [New] and [Server.Serve]; hand out links with [MonitorURL].
package web
