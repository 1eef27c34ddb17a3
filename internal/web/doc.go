// Package web serves the browser terminal: the page a monitoring URL opens,
// where a human watches a live shell session and types into it.
//
// It owns HTTP routes, the WebSocket protocol between page and server, and the
// embedded assets (plain HTML, CSS and JS plus a vendored xterm.js). It does not
// know how sessions are made, owned or run: it reaches them only through the
// [Sessions], [Terminal] and [Recordings] interfaces, which the session layer
// implements, and, for the dashboard, through [ApprovalDesk],
// [SessionDirectory] and [AuditLog].
//
//	browser ──GET /s/{key}────▶ page (escaped name, strict headers)
//	        ──GET /s/{key}/ws─▶ Sessions.Terminal(key)
//	        ◀── binary: scrollback, then live bytes ── Terminal.Watch
//	        ─── text: {"t":"i","d":"ls\r"} ───────────▶ Terminal.Input
//	        ─── text: {"t":"r","c":120,"r":40} ───────▶ Terminal.Resize
//	        ◀── text: {"t":"s",…} the status strip ── Statuser
//	        ◀── text: {"t":"h","id":…,"m":…} ─────── HumanDesk (the agent asks for the human)
//	        ─── text: {"t":"b","id":…,"n":…} ───────▶ HumanDesk.HandBack
//	        ◀── close 1000 "session ended: reason" when Watch returns
//
// Whoever may type may also move files (see [FileDesk]): the page uploads
// a file picked or dropped on it, and downloads one by path.
//
//	browser ──POST /s/{key}/files?path=P (body: the file)──▶ FileDesk.PutFile
//	        ──GET /s/{key}/files?path=P──▶ FileDesk.GetFile: an attachment
//
// Once a session has ended, the same URL replays it, if [Options.Recordings]
// has its recording: the page then loads an asciicast v2 file from beside
// itself and plays it in the browser, at 1x, 4x or at once.
//
//	browser ──GET /s/{key}──────▶ replay page, when Sessions no longer knows key
//	        ──GET /s/{key}/cast─▶ Recordings.Recording(key): the .cast file,
//	                              its input events ("i") for the operator only
//
// The key in the path is a capability: whoever holds the URL may watch,
// with no other login. Typing takes more, because the agent holds the URL
// too: with [Options.Operator], the server takes keys only from a browser
// signed in as the operator, a program presenting the operator token
// (tandem attach), or a browser the operator admitted with a typing link
// (POST /api/admit; /s/{key}?admit=T trades T for a cookie on that
// session's path). Everyone else's input and resizes are dropped, and the
// upgrade's [InputHeader] says which it is. The server never puts the key anywhere but
// the URL itself (Referrer-Policy no-referrer, no-store caching), answers an
// unknown key with the same 404 as any unknown path, accepts WebSocket
// upgrades only from its own origin, and [Listen] binds loopback unless told
// otherwise out loud.
//
// With [Options.Previews], /s/{key}/port/{port}/… is the way into a port
// the session forwards (the agent's dev server): for a viewer who may type
// it redirects to the forward's own origin with a single-use ticket, for
// the watch link alone it answers 401; the proxied app never runs on this
// origin (preview.go). The status strip links the forwarded ports.
//
// With [Options.Operator], / is the operator dashboard instead of a page
// that explains tandem: pending approvals to answer, what was decided, live
// and ended sessions, and the audit log. It is for whoever holds the
// operator token, Jupyter-style: the link [DashboardURL] builds signs a
// browser in with a cookie, and the page then talks to /api/.
//
//	browser ──GET /?token=T──────▶ cookie tandem_operator=T (HttpOnly,
//	        ◀── 303 to / ────────── SameSite=Strict), token out of the URL
//	        ──GET /──────────────▶ dashboard page (no data in it), or 401
//	        ──GET /api/state─────▶ {pending, recent, held, sessions}: Approvals,
//	                               Sessions.Sessions (rows, never keys)
//	        ──GET /api/ws────────▶ {"t":"state",…} now and after each change
//	                               (Approvals.Watch, Sessions.Changes), at
//	                               most one per 100 ms, the last never dropped
//	        ──POST /api/approvals/{id}/decision {"approve","reason",
//	          "rememberMinutes"}─▶ Approvals.Decide (by dashboard)
//	        ──POST /api/sessions/{id}/watch──▶ {"url":"/s/{key}"}:
//	                               Sessions.MonitorKey, only when asked
//	        ──GET /api/audit?session=&tenant=&tool=&outcome=&limit=──▶ Audit.Search
//	        ──GET /replays/{id}(/cast)──▶ Replays.Replay: an ended session's
//	                               replay by its id, whichever process ran it
//
// Every /api/ route needs the cookie (else 401); each POST and the
// WebSocket must come from the dashboard's own origin (else 403), and a
// POST's body must be JSON (else 415). /replays/ needs the cookie or the
// bearer token too: its page is the sign-in page (401) and its cast not
// found (404) for anyone else. The page sets all data as text.
//
// Start with [Listen], [New] and [Server.Serve]; hand out links with
// [MonitorURL], and the dashboard's with [DashboardURL].
package web
