// The browser terminal of one tandem session.
//
// The page's own URL is the capability (/s/{key}); the WebSocket lives beside
// it at /s/{key}/ws. Server to browser: binary messages of raw terminal bytes,
// the scrollback first, then live output. Browser to server: text messages of
// JSON, {"t":"i","d":"…"} for input, {"t":"r","c":COLS,"r":ROWS} for a
// resize and {"t":"b","id":"…","n":"…"} to hand the session back to the
// agent. Server to browser, text: {"t":"h","id":"…","m":"…"} while the agent
// asks for the human, {"t":"h"} when it does not. A close with code 1000
// means the session ended.
'use strict';

(function () {
  // Input is sent in pieces of at most this many UTF-16 units, so a large
  // paste stays under the server's 64 KiB message limit even when every
  // character needs a six-byte JSON escape.
  const inputChunk = 8192;

  // Only a viewer the server takes keys from may type: the operator, or a
  // guest the operator admitted. The server drops everyone else's keys
  // anyway; here the terminal takes none, and a line says why.
  const typing = document.body.dataset.typing === 'yes';
  const statusEl = document.getElementById('status');
  const reconnectEl = document.getElementById('reconnect');
  const term = new Terminal({
    cursorBlink: true,
    scrollback: 10000,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    fontSize: 14,
    // Room under the baseline: at line height 1, fonts whose underscore
    // lies below their natural height (DejaVu Sans Mono, Debian's
    // monospace, at 14 px) lose it to the DOM renderer's clipped rows
    // (xtermjs/xterm.js#4067): deploy_key read "deploy key".
    lineHeight: 1.2,
    theme: { background: '#0d1117', foreground: '#c9d1d9', cursor: '#c9d1d9' },
    disableStdin: !typing,
    allowProposedApi: true, // decorations: the marks beside each command's line
  });
  // Program output must never become session input. xterm.js answers
  // terminal queries (cursor position, device attributes, colours, modes)
  // by sending the answer as if typed: in a shared terminal that would be
  // the page typing into the human's command line. These handlers take the
  // queries and answer nothing. The shell's programs see no reply, as on a
  // terminal that does not support the query.
  swallowQueries(term);
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById('terminal'));
  fit.fit();

  let ws = null;
  let state = 'connecting';

  function swallowQueries(t) {
    const p = t.parser;
    const csi = [
      { final: 'n' },                                 // DSR: status, cursor position
      { prefix: '?', final: 'n' },                    // DECDSR
      { final: 'c' },                                 // DA1
      { prefix: '>', final: 'c' },                    // DA2
      { prefix: '=', final: 'c' },                    // DA3
      { intermediates: '$', final: 'p' },             // DECRQM (ANSI)
      { prefix: '?', intermediates: '$', final: 'p' }, // DECRQM (DEC)
      { prefix: '>', final: 'q' },                    // XTVERSION
      { final: 't' },                                 // window reports
      { prefix: '?', final: 'u' },                    // kitty keyboard query
    ];
    for (const id of csi) {
      p.registerCsiHandler(id, function () { return true; });
    }
    // Focus reports (mode 1004) would type ESC[I / ESC[O on every click in
    // or out of the page: keep the mode off.
    for (const final of ['h', 'l']) {
      p.registerCsiHandler({ prefix: '?', final: final }, function (params) {
        for (const v of params) {
          if (v === 1004) {
            return true;
          }
        }
        return false;
      });
    }
    p.registerDcsHandler({ intermediates: '$', final: 'q' }, function () { return true; }); // DECRQSS
    p.registerDcsHandler({ intermediates: '+', final: 'q' }, function () { return true; }); // XTGETTCAP
    // Colour queries (OSC 4, 10-19, 104...) end in '?': answer none; colour
    // settings pass through.
    for (const id of [4, 5, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 52]) {
      p.registerOscHandler(id, function (data) { return data.indexOf('?') >= 0; });
    }
  }

  function setStatus(next, text) {
    state = next;
    statusEl.dataset.state = next;
    statusEl.textContent = text;
    reconnectEl.hidden = next !== 'disconnected';
  }

  function send(msg) {
    if (ws && ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify(msg));
    }
  }

  function sendInput(data) {
    for (let i = 0; i < data.length;) {
      let end = Math.min(i + inputChunk, data.length);
      const last = data.charCodeAt(end - 1);
      if (end < data.length && last >= 0xd800 && last <= 0xdbff) {
        end--; // keep a surrogate pair in one piece
      }
      send({ t: 'i', d: data.slice(i, end) });
      i = end;
    }
  }

  function sendSize() {
    send({ t: 'r', c: term.cols, r: term.rows });
  }

  function socketURL() {
    const url = new URL(location.pathname.replace(/\/+$/, '') + '/ws', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return url.href;
  }

  function connect() {
    setStatus('connecting', 'connecting…');
    const sock = new WebSocket(socketURL());
    sock.binaryType = 'arraybuffer';
    ws = sock;
    sock.onopen = function () {
      setStatus('live', 'live');
      fit.fit();
      sendSize();
      term.focus();
    };
    sock.onmessage = function (ev) {
      if (ev.data instanceof ArrayBuffer) {
        term.write(new Uint8Array(ev.data));
        return;
      }
      let m = null;
      try {
        m = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      if (m && m.t === 'h') {
        showRequest(typeof m.id === 'string' ? m.id : '', typeof m.m === 'string' ? m.m : '');
      } else if (m && m.t === 's') {
        showStatus(m);
      }
    };
    sock.onclose = function (ev) {
      if (ws !== sock) {
        return;
      }
      if (ev.code === 1000) {
        // "session ended", or "session ended: idle_timeout" and the like.
        const why = /^session ended(: [a-z_]+)?$/.test(ev.reason) ? ev.reason : 'session ended';
        setStatus('ended', why);
        sessionEnded(why);
        term.write('\r\n\x1b[1;31m[' + why + ']\x1b[0m\r\n');
        // The same link replays the session once it is over.
        const replayEl = document.getElementById('replay');
        replayEl.href = location.pathname;
        replayEl.hidden = false;
      } else {
        setStatus('disconnected', ev.reason ? 'disconnected: ' + ev.reason : 'disconnected');
      }
    };
  }

  if (typing) {
    term.onData(sendInput);
  }

  // sessionEnded turns the page into a record of the session: nobody can
  // type any more, so it no longer says "you may type", offers no typing
  // link or hand-back, and the strip says why the session ended.
  function sessionEnded(why) {
    term.options.disableStdin = true;
    term.options.cursorBlink = false;
    status = null;
    const mode = document.getElementById('mode');
    if (mode) {
      mode.textContent = 'nobody can type: the session ended';
    }
    document.getElementById('agent-state').textContent = why.charAt(0).toUpperCase() + why.slice(1);
    for (const id of ['admit', 'admitted', 'watching', 'request', 'gate', 'files']) {
      const e = document.getElementById(id);
      if (e) {
        e.hidden = true;
      }
    }
    for (const id of ['strip-approvals', 'strip-held', 'strip-denied', 'strip-network']) {
      document.getElementById(id).replaceChildren();
    }
    fit.fit();
  }

  // The status strip: what the agent does now, what waits for approval
  // (decided here by the operator), what the policy refused, how many of
  // the human's commands the agent will be told of, who watches. Every
  // value is set as text.
  const operator = document.body.dataset.operator === 'yes';
  const stripEl = document.getElementById('strip');
  let status = null;
  function str(v) { return typeof v === 'string' ? v : ''; }
  function node(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) {
      e.className = cls;
    }
    if (text) {
      e.textContent = text;
    }
    return e;
  }
  // oneLine shows a command in the strip's one status line: its first
  // line, cut to 160 characters, saying how much is left out. A pasted
  // block of 300 lines must not grow the strip over the terminal.
  function oneLine(s) {
    const lines = s.split('\n');
    let first = lines[0];
    let more = '';
    if (first.length > 160) {
      first = first.slice(0, 160);
      more = '…';
    }
    if (lines.length > 1) {
      more += ' … (' + lines.length + ' lines)';
    }
    return first + more;
  }
  function agentLine(st) {
    const cmd = oneLine(str(st.command));
    const since = Date.parse(str(st.since));
    const secs = isNaN(since) ? 0 : Math.max(0, Math.round((Date.now() - since) / 1000));
    switch (st.agent) {
      case 'running': return 'Agent: running ' + cmd + ' for ' + secs + ' s';
      case 'waiting_approval': return 'Agent: waiting for approval of ' + cmd;
      case 'waiting_human': return 'Agent: waiting for you';
      case 'human_running': return 'A human command runs: ' + cmd + ' (' + secs + ' s)';
    }
    return 'Agent: idle';
  }
  // untilText is " (until HH:MM)" for an expiry time, in the viewer's
  // zone; "" if there is none.
  function untilText(iso) {
    const d = new Date(str(iso));
    if (str(iso) === '' || isNaN(d)) {
      return '';
    }
    return ' (until ' + d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' }) + ')';
  }
  function decide(id, approve, li) {
    for (const b of li.querySelectorAll('button')) {
      b.disabled = true;
    }
    fetch('/api/approvals/' + encodeURIComponent(id) + '/decision', {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ approve: approve, reason: '' }),
    }).then(function (res) {
      if (!res.ok && res.status !== 409) {
        li.append(node('span', 'strip-error', ' the decision failed (' + res.status + ')'));
        for (const b of li.querySelectorAll('button')) {
          b.disabled = false;
        }
      }
    }, function () {
      li.append(node('span', 'strip-error', ' tandem could not be reached'));
    });
  }
  // Each command's line is marked by its source, agent or human, and
  // once it ended by its exit code: a decoration over the row, drawn by
  // the page, so the terminal's bytes stay as they are. The line is found
  // in the buffer by its text, after what arrived so far is drawn.
  const marked = new Map(); // command id -> {source, command, exit, el}
  function findLine(command) {
    const first = str(command).split('\n')[0].trim().slice(0, 60);
    if (first === '') {
      return -1;
    }
    const taken = new Set();
    for (const m of marked.values()) {
      if (m.marker && !m.marker.isDisposed) {
        taken.add(m.marker.line);
      }
    }
    // A long line wraps on a narrow screen: the text may start on one row
    // and go on over the next ones.
    const buf = term.buffer.active;
    const row = function (y) {
      const line = buf.getLine(y);
      return line ? line.translateToString(false) : '';
    };
    for (let y = buf.length - 1; y >= 0 && y >= buf.length - 500; y--) {
      if (taken.has(y)) {
        continue;
      }
      const head = row(y);
      let text = head;
      for (let k = 1; k <= 4 && text.length < head.length + first.length; k++) {
        text += row(y + k);
      }
      const at = text.indexOf(first);
      if (at >= 0 && at < head.length) {
        return y;
      }
    }
    return -1;
  }
  function paintMark(m) {
    if (!m.el) {
      return;
    }
    m.el.classList.add('cmd-mark', m.source);
    m.el.classList.toggle('failed', m.exit !== null && m.exit !== 0);
    m.el.dataset.source = m.source;
    m.el.dataset.exit = m.exit === null ? '' : String(m.exit);
    m.el.title = (m.source === 'agent' ? "The agent's command" : "A human's command") +
      (m.exit === null ? '' : ', exit ' + m.exit);
  }
  function markCommand(last) {
    if (!last || typeof last.id !== 'string' || last.id === '') {
      return;
    }
    const exit = typeof last.exit === 'number' ? last.exit : null;
    const known = marked.get(last.id);
    if (known) {
      known.exit = exit;
      paintMark(known);
      return;
    }
    const m = { source: last.source === 'human' ? 'human' : 'agent', command: str(last.command), exit: exit, el: null, marker: null };
    marked.set(last.id, m);
    place(m, 0);
  }
  // place decorates m's line once the terminal shows it: the line may
  // arrive a moment after the status that names the command.
  function place(m, tries) {
    term.write('', function () {
      const y = findLine(m.command);
      if (y < 0) {
        if (tries < 20) {
          setTimeout(function () { place(m, tries + 1); }, 250);
        }
        return;
      }
      const buf = term.buffer.active;
      const marker = term.registerMarker(y - (buf.baseY + buf.cursorY));
      if (!marker) {
        return;
      }
      m.marker = marker;
      const deco = term.registerDecoration({ marker: marker, x: 0, width: term.cols, layer: 'bottom' });
      if (deco) {
        deco.onRender(function (el) { m.el = el; paintMark(m); });
      }
    });
  }

  function showStatus(st) {
    status = st;
    for (const c of Array.isArray(st.commands) ? st.commands : []) {
      markCommand(c);
    }
    stripEl.hidden = false;
    document.getElementById('agent-state').textContent = agentLine(st);
    const gateEl = document.getElementById('gate');
    const n = Number(st.gate) || 0;
    gateEl.hidden = n === 0;
    gateEl.textContent = n === 1 ? '1 of your commands will be reported to the agent before it acts'
      : n + ' of your commands will be reported to the agent before it acts';
    const v = Number(st.viewers) || 0;
    const who = (Array.isArray(st.watchers) ? st.watchers : []).map(str).filter(Boolean);
    document.getElementById('viewers').textContent = (v === 1 ? '1 watching' : v + ' watching') +
      (who.length > 0 ? ': ' + who.join(', ') : '');
    const approvals = (Array.isArray(st.approvals) ? st.approvals : []).map(function (a) {
      const li = node('li', 'strip-approval');
      li.dataset.id = str(a.id);
      li.append(node('span', 'label', 'Waiting for approval: '), node('code', '', str(a.command) || str(a.tool)));
      if (a.cwd) {
        // An approval is bound to its directory: the same command from
        // another one asks again.
        const cwd = node('span', 'cwd', ' in ');
        cwd.title = 'An approval holds in this directory only';
        cwd.append(node('code', '', str(a.cwd)));
        li.append(cwd);
      }
      if (a.rule) {
        li.append(node('span', 'rule', ' (' + str(a.rule) + ')'));
      }
      if (operator) {
        const yes = node('button', 'approve', 'Approve');
        const no = node('button', 'deny', 'Deny');
        yes.type = no.type = 'button';
        yes.addEventListener('click', function () { decide(str(a.id), true, li); });
        no.addEventListener('click', function () { decide(str(a.id), false, li); });
        li.append(' ', yes, ' ', no);
      }
      return li;
    });
    document.getElementById('strip-approvals').replaceChildren(...approvals);
    // Approved after the agent's call stopped waiting: nothing runs until
    // the agent repeats the identical call, and only until it expires.
    const held = (Array.isArray(st.held) ? st.held : []).map(function (a) {
      const li = node('li', 'strip-held');
      li.dataset.id = str(a.id);
      li.append(node('span', 'label', 'Approved'), ' — the agent\'s next identical call runs it' + untilText(a.expires) + ': ',
        node('code', '', str(a.command) || str(a.tool)));
      return li;
    });
    document.getElementById('strip-held').replaceChildren(...held);
    const denied = (Array.isArray(st.denied) ? st.denied : []).map(function (d) {
      const li = node('li', 'strip-denied');
      li.append(node('span', 'label', 'Refused by the policy: '), node('code', '', str(d.command) || str(d.tool)),
        node('span', 'rule', ' (' + str(d.rule) + ')'));
      return li;
    });
    document.getElementById('strip-denied').replaceChildren(...denied);
    const network = (Array.isArray(st.network) ? st.network : []).map(function (c) {
      const open = c.decision === 'allowed' || c.decision === 'approved';
      const li = node('li', open ? 'strip-connection' : 'strip-refused');
      li.append(node('span', 'label', open ? 'Connected: ' : 'Network refused: '), node('code', '', str(c.target)));
      if (!open && c.reason) {
        li.append(node('span', 'rule', ' (' + str(c.reason) + ')'));
      }
      return li;
    });
    document.getElementById('strip-network').replaceChildren(...network);
    // Forwarded ports: each link opens the agent's server on an origin of
    // its own, for the operator or an admitted viewer.
    const ports = (Array.isArray(st.ports) ? st.ports : []).map(function (p) {
      const li = node('li', 'strip-port');
      const a = node('a', '', 'port ' + (Number(p.port) || 0));
      const url = str(p.url);
      if (url.startsWith('/s/')) {
        a.href = url;
      }
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      li.append(node('span', 'label', 'Preview: '), a);
      return li;
    });
    document.getElementById('strip-ports').replaceChildren(...ports);
    fit.fit();
  }
  setInterval(function () {
    if (status && (status.agent === 'running' || status.agent === 'human_running')) {
      document.getElementById('agent-state').textContent = agentLine(status);
    }
  }, 1000);

  // The agent's request for the human (ssh_request_human): its message,
  // shown as text, and for a viewer who may type, the hand-back.
  const requestEl = document.getElementById('request');
  const handbackEl = document.getElementById('handback');
  const noteEl = document.getElementById('request-note');
  let requestID = '';
  function showRequest(id, message) {
    const changed = id !== requestID;
    requestID = id;
    document.getElementById('request-message').textContent = message;
    requestEl.hidden = id === '';
    if (handbackEl && changed) {
      handbackEl.disabled = false;
      noteEl.value = '';
    }
    fit.fit();
  }
  if (handbackEl) {
    handbackEl.addEventListener('click', function () {
      if (requestID === '') {
        return;
      }
      handbackEl.disabled = true;
      send({ t: 'b', id: requestID, n: noteEl.value });
      term.focus();
    });
  }
  const admitEl = document.getElementById('admit');
  if (admitEl) {
    admitEl.addEventListener('click', function () {
      admitEl.disabled = true;
      fetch('/api/admit', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ path: location.pathname.replace(/\/+$/, '') }),
        credentials: 'same-origin',
      }).then(function (r) { return r.json(); }).then(function (r) {
        admitEl.disabled = false;
        if (!r.success || typeof r.url !== 'string') {
          return;
        }
        const out = document.getElementById('admit-url');
        out.value = new URL(r.url, location.href).href;
        document.getElementById('admitted').hidden = false;
        out.select();
        fit.fit();
      }, function () { admitEl.disabled = false; });
    });
  }
  // The session's files, for a viewer who may type: a file chosen in the
  // input or dropped on the page goes into the workspace (POST beside the
  // page's URL, the body the file itself); a path typed in the box comes
  // back as a download. The server refuses both to anyone else, checks the
  // path, the policy and the size, and tells the agent. Every message is
  // set as text.
  const filesEl = document.getElementById('files');
  function filesURL(path, overwrite) {
    return location.pathname.replace(/\/+$/, '') + '/files?path=' + encodeURIComponent(path) +
      (overwrite ? '&overwrite=1' : '');
  }
  function filesSay(text, ok) {
    const el = document.getElementById('files-message');
    el.textContent = text;
    el.className = 'files-message ' + (ok ? 'ok' : 'error');
    fit.fit();
  }
  // refusal reads the server's {error, message} reply, whatever came.
  function refusal(res) {
    return res.text().then(function (body) {
      let m = null;
      try {
        m = JSON.parse(body);
      } catch (e) {
        m = null;
      }
      return (m && typeof m.message === 'string' && m.message) ? m.message : 'refused (' + res.status + ')';
    });
  }
  function upload(file) {
    if (!filesEl || state === 'ended') {
      return;
    }
    const dir = document.getElementById('upload-dir').value.trim().replace(/\/+$/, '');
    const path = dir === '' ? file.name : dir + '/' + file.name;
    const overwrite = document.getElementById('upload-replace').checked;
    filesSay('Uploading ' + path + ' (' + file.size + ' bytes)…', true);
    fetch(filesURL(path, overwrite), {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/octet-stream' },
      body: file,
    }).then(function (res) {
      if (!res.ok) {
        return refusal(res).then(function (msg) { filesSay('Upload of ' + path + ' refused: ' + msg, false); });
      }
      return res.json().then(function (r) {
        filesSay('Uploaded ' + str(r.path) + ' (' + Number(r.bytes) + ' bytes, sha256 ' + str(r.sha256) +
          '); the agent is told on its next call', true);
      });
    }, function () {
      filesSay('Upload of ' + path + ' failed: tandem could not be reached', false);
    });
  }
  function download() {
    const path = document.getElementById('download-path').value.trim();
    if (path === '' || state === 'ended') {
      return;
    }
    filesSay('Downloading ' + path + '…', true);
    fetch(filesURL(path, false), { credentials: 'same-origin', cache: 'no-store' }).then(function (res) {
      if (!res.ok) {
        return refusal(res).then(function (msg) { filesSay('Download of ' + path + ' refused: ' + msg, false); });
      }
      return res.blob().then(function (blob) {
        const a = document.createElement('a');
        a.href = URL.createObjectURL(blob);
        a.download = path.split('/').pop();
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(function () { URL.revokeObjectURL(a.href); }, 60000);
        filesSay('Downloaded ' + path + ' (' + blob.size + ' bytes); the agent is told on its next call', true);
      });
    }, function () {
      filesSay('Download of ' + path + ' failed: tandem could not be reached', false);
    });
  }
  if (filesEl) {
    const input = document.getElementById('upload-input');
    input.addEventListener('change', function () {
      for (const f of input.files) {
        upload(f);
      }
      input.value = '';
    });
    document.getElementById('download').addEventListener('click', download);
    document.getElementById('download-path').addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter') {
        download();
      }
    });
    // A file dragged over the page lands in the workspace when dropped.
    const dragging = function (ev) {
      return ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes('Files');
    };
    document.addEventListener('dragover', function (ev) {
      if (dragging(ev) && state !== 'ended') {
        ev.preventDefault();
        ev.dataTransfer.dropEffect = 'copy';
        document.body.classList.add('dropping');
      }
    });
    document.addEventListener('dragleave', function (ev) {
      if (ev.relatedTarget === null) {
        document.body.classList.remove('dropping');
      }
    });
    document.addEventListener('drop', function (ev) {
      document.body.classList.remove('dropping');
      if (!dragging(ev)) {
        return;
      }
      ev.preventDefault();
      for (const f of ev.dataTransfer.files) {
        upload(f);
      }
    });
  }

  term.onResize(sendSize);
  window.addEventListener('resize', function () { fit.fit(); });
  reconnectEl.addEventListener('click', function () {
    term.reset(); // the server replays the scrollback
    connect();
  });

  // Hooks for tests and curious humans: nothing here that the page does not
  // already show.
  window.tandem = {
    term: term,
    status: function () { return state; },
    get typing() { return typing && state !== 'ended'; },
    request: function () { return requestID; },
    marks: function () {
      return [...marked.values()].filter(function (m) { return m.el; }).map(function (m) {
        return { source: m.source, command: m.command, exit: m.exit };
      });
    },
    text: function () {
      const buf = term.buffer.active;
      const lines = [];
      for (let i = 0; i < buf.length; i++) {
        lines.push(buf.getLine(i).translateToString(true));
      }
      return lines.join('\n');
    },
  };

  connect();
})();
