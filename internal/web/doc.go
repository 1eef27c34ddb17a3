// Package web serves the browser terminal: the page a monitoring URL opens,
// where a human watches a live shell session and types into it.
//
// It owns HTTP routes, the WebSocket protocol between page and server, and the
// embedded assets (plain HTML, CSS and JS plus a vendored xterm.js). It does not
// know how sessions are made, owned or run: it reaches them only through the
// [Sessions], [Terminal] and [Recordings] interfaces, which the session layer
// implements.
//
//	browser ──GET /s/{key}────▶ page (escaped name, strict headers)
//	        ──GET /s/{key}/ws─▶ Sessions.Terminal(key)
//	        ◀── binary: scrollback, then live bytes ── Terminal.Watch
//	        ─── text: {"t":"i","d":"ls\r"} ───────────▶ Terminal.Input
//	        ─── text: {"t":"r","c":120,"r":40} ───────▶ Terminal.Resize
//	        ◀── close 1000 "session ended" when Watch returns
//
// Once a session has ended, the same URL replays it, if [Options.Recordings]
// has its recording: the page then loads an asciicast v2 file from beside
// itself and plays it in the browser, at 1x, 4x or at once.
//
//	browser ──GET /s/{key}──────▶ replay page, when Sessions no longer knows key
//	        ──GET /s/{key}/cast─▶ Recordings.Recording(key): the .cast file
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
