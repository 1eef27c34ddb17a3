// The operator dashboard: pending approvals to answer, what was decided,
// the sessions to watch or replay, and the audit log.
//
// The page holds no data when it loads. The WebSocket at /api/ws sends
// {"t":"state", now, pending, recent, sessions} on connect and after every
// change; the page redraws from it and never needs a reload. Decisions go
// to POST /api/approvals/{id}/decision; POST /api/sessions/{id}/watch hands
// out a session's monitoring URL only when the operator opens it. Every
// piece of data is set as text (textContent, Text nodes), never as HTML.
'use strict';

(function () {
  // Keep in step with the server: maxReason and maxRememberMinutes.
  const maxReason = 1000;
  const maxRememberMinutes = 1440;
  const defaultRememberMinutes = 15;
  // An expiry closer than this is shown as urgent.
  const urgentMs = 30000;
  // The audit table reloads on changes at most this often.
  const auditEvery = 2000;

  const statusEl = document.getElementById('status');
  const noticeEl = document.getElementById('notice');
  const pendingEl = document.getElementById('pending');
  const pendingCountEl = document.getElementById('pending-count');
  const pendingEmptyEl = document.getElementById('pending-empty');
  const recentEl = document.getElementById('recent');
  const recentEmptyEl = document.getElementById('recent-empty');
  const sessionsErrorEl = document.getElementById('sessions-error');
  const liveEl = document.getElementById('live');
  const liveEmptyEl = document.getElementById('live-empty');
  const endedEl = document.getElementById('ended');
  const endedEmptyEl = document.getElementById('ended-empty');
  const auditForm = document.getElementById('audit-filter'); // absent without an audit log
  const auditEl = document.getElementById('audit');
  const auditStatusEl = document.getElementById('audit-status');

  // The sign-in page's one retry is spent: the dashboard is here.
  sessionStorage.removeItem('tandem-signin-retried');

  let state = 'connecting'; // connecting, live, disconnected, signedout
  let ws = null;
  let retries = 0;
  let skew = 0; // the server's clock minus the browser's, in ms
  let current = { pending: [], recent: [], held: [], sessions: [] };
  const cards = new Map(); // approval id -> its <li> in the pending list
  const ours = new Set(); // approvals this page decided

  // el makes an element. props: text (textContent), class, and attributes;
  // children: elements or strings (as Text nodes).
  function el(tag, props, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'text') {
        e.textContent = v;
      } else if (k === 'class') {
        e.className = v;
      } else {
        e.setAttribute(k, v);
      }
    }
    for (const c of children || []) {
      e.append(c);
    }
    return e;
  }

  function text(v) {
    return v === undefined || v === null ? '' : String(v);
  }

  function setStatus(next, label) {
    state = next;
    statusEl.dataset.state = next;
    statusEl.textContent = label;
  }

  function notice(message, link) {
    noticeEl.replaceChildren(message);
    if (link) {
      noticeEl.append(' ', link);
    }
    noticeEl.hidden = false;
  }

  function signOut() {
    setStatus('signedout', 'signed out: open the dashboard link again');
    if (ws) {
      const s = ws;
      ws = null;
      s.close();
    }
  }

  function when(iso) {
    if (!iso) {
      return '';
    }
    const d = new Date(iso);
    if (isNaN(d)) {
      return '';
    }
    // Always the date and the zone: a record is read days later, and by
    // people in other zones.
    return d.toLocaleString(undefined, {
      year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short',
    });
  }

  // labelled gives each cell of a row its column's name, which the phone
  // layout shows beside the value.
  function labelled(table, tr) {
    const heads = table.tHead.rows[0].cells;
    for (let i = 0; i < tr.cells.length && i < heads.length; i++) {
      const label = heads[i].textContent.trim();
      if (label) {
        tr.cells[i].dataset.label = label;
      }
    }
    return tr;
  }

  // copyButton copies the text of the code element beside it.
  function copyButton(code) {
    const b = el('button', { type: 'button', class: 'copy', 'aria-label': 'Copy', text: 'Copy' });
    b.addEventListener('click', function () {
      const done = function (ok) {
        b.textContent = ok ? 'Copied' : 'Select and copy';
        setTimeout(function () { b.textContent = 'Copy'; }, 1500);
      };
      if (navigator.clipboard) {
        navigator.clipboard.writeText(code.textContent).then(function () { done(true); }, function () { done(false); });
      } else {
        done(false);
      }
    });
    return b;
  }

  function postJSON(path, body) {
    return fetch(path, {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        return { status: res.status, ok: res.ok, data: data };
      });
    });
  }

  // ---- pending approvals ----

  function countdownText(expires) {
    const left = Date.parse(expires) - (Date.now() + skew);
    if (!(left > 0)) {
      return { label: 'expiring…', urgent: true };
    }
    const s = Math.ceil(left / 1000);
    const m = Math.floor(s / 60);
    return { label: 'expires in ' + m + ':' + String(s % 60).padStart(2, '0'), urgent: left < urgentMs };
  }

  function tick() {
    for (const c of pendingEl.querySelectorAll('.countdown')) {
      const t = countdownText(c.dataset.expires);
      if (c.textContent !== t.label) {
        c.textContent = t.label;
      }
      c.classList.toggle('urgent', t.urgent);
    }
  }

  function field(dl, label, value) {
    if (value) {
      dl.append(el('dt', { text: label }), el('dd', { text: value }));
    }
  }

  function approvalCard(a) {
    const act = a.action || {};
    const titleId = 'approval-' + cards.size + '-' + Math.random().toString(36).slice(2);
    const li = el('li', { class: 'approval', 'data-id': text(a.id), 'aria-labelledby': titleId });

    // Selected with others, it is still decided on its own: one request
    // per approval, each bound to its own action.
    const select = el('input', { type: 'checkbox', class: 'select', 'aria-label': 'Select' });
    select.addEventListener('change', updateBulk);
    const head = el('div', { class: 'head', id: titleId }, [
      select,
      el('span', { class: 'tool', text: text(act.tool) }),
      el('span', { class: 'where' }, ['in ', el('span', { class: 'mono', text: text(act.sessionName) })]),
      el('span', { class: 'countdown', role: 'timer', 'data-expires': text(a.expires) }),
    ]);
    li.append(head);

    const dl = el('dl');
    if (act.command) {
      // A program a command started (local exec judging) is named as such,
      // beside the agent's command line that started it.
      dl.append(el('dt', { text: act.parent ? 'Program' : 'Command' }), el('dd', {}, [el('pre', { class: 'command' }, [el('code', { text: text(act.command) })])]));
    }
    if (act.parent) {
      dl.append(el('dt', { text: 'Started by' }), el('dd', {}, [el('pre', { class: 'command' }, [el('code', { text: text(act.parent) })])]));
    }
    field(dl, 'Directory', text(act.cwd));
    field(dl, 'Session', text(act.sessionName));
    field(dl, 'Target', text(act.target));
    field(dl, 'Tenant', text(act.tenant));
    field(dl, 'Actor', text(act.actor));
    field(dl, 'Rule', text(a.rule));
    field(dl, 'Why asked', text(a.reason));
    li.append(dl);

    const reason = el('input', { type: 'text', class: 'reason-text', maxlength: String(maxReason), autocomplete: 'off', placeholder: 'optional' });
    const minutes = el('input', {
      type: 'number', class: 'minutes', min: '1', max: String(maxRememberMinutes),
      value: String(defaultRememberMinutes), 'aria-label': 'Remember for minutes',
    });
    const approve = el('button', { type: 'button', class: 'approve', 'aria-label': 'Approve', text: 'Approve' });
    const deny = el('button', { type: 'button', class: 'deny', 'aria-label': 'Deny', text: 'Deny' });
    const remember = el('button', {
      type: 'button', class: 'remember', 'aria-label': 'Remember', text: 'Remember',
      title: 'Approve, and approve this same command in this session again without asking, for the minutes given',
    });
    const outcome = el('p', { class: 'outcome', role: 'status' });
    li.append(el('div', { class: 'controls' }, [
      el('label', { class: 'reason' }, ['Reason', reason]),
      approve, deny, remember, minutes, el('span', { text: 'min', 'aria-hidden': 'true' }),
    ]), outcome);

    const buttons = [approve, deny, remember];
    function decide(yes, rememberIt) {
      let n = 0;
      if (rememberIt) {
        n = Number(minutes.value);
        if (!Number.isInteger(n) || n < 1 || n > maxRememberMinutes) {
          outcome.textContent = 'Remember for 1 to ' + maxRememberMinutes + ' minutes.';
          minutes.focus();
          return;
        }
      }
      for (const b of buttons) {
        b.disabled = true;
      }
      outcome.textContent = 'sending…';
      ours.add(a.id);
      postJSON('/api/approvals/' + encodeURIComponent(a.id) + '/decision',
        { approve: yes, reason: reason.value.trim(), rememberMinutes: n }).then(function (r) {
        if (r.status === 401) {
          signOut();
        }
        if (r.data.approval) {
          settle(r.data.approval);
        }
        if (r.status === 409) {
          notice('That approval was decided already: ' + verdict(r.data.approval) + '.');
        } else if (!r.ok) {
          ours.delete(a.id);
          outcome.textContent = text(r.data.message) || 'The decision failed (' + r.status + ').';
          for (const b of buttons) {
            b.disabled = false;
          }
        }
      }, function () {
        ours.delete(a.id);
        outcome.textContent = 'tandem could not be reached; try again.';
        for (const b of buttons) {
          b.disabled = false;
        }
      });
    }
    li.decide = decide;
    approve.addEventListener('click', function () { decide(true, false); });
    deny.addEventListener('click', function () { decide(false, false); });
    remember.addEventListener('click', function () { decide(true, true); });
    return li;
  }

  // settle moves a decided approval from pending to recent at once, before
  // the server's next state says so.
  function settle(a) {
    if (!a || a.status === 'pending') {
      return;
    }
    current = {
      now: current.now,
      pending: current.pending.filter(function (p) { return p.id !== a.id; }),
      recent: [a].concat(current.recent.filter(function (p) { return p.id !== a.id; })),
      held: current.held,
      sessions: current.sessions,
      sessionsError: current.sessionsError,
    };
    render();
  }

  function renderPending(list) {
    const want = new Set(list.map(function (a) { return a.id; }));
    for (const [id, li] of cards) {
      if (want.has(id)) {
        continue;
      }
      const busy = li.contains(document.activeElement) || li.querySelector('.reason-text').value !== '';
      li.remove();
      cards.delete(id);
      if (busy && !ours.has(id)) {
        const a = current.recent.find(function (r) { return r.id === id; });
        notice('An approval you were answering was decided elsewhere' + (a ? ': ' + verdict(a) : '') + '.');
      }
    }
    let prev = null;
    for (const a of list) {
      let li = cards.get(a.id);
      if (!li) {
        li = approvalCard(a);
        cards.set(a.id, li);
      }
      const at = prev ? prev.nextSibling : pendingEl.firstChild;
      if (at !== li) {
        pendingEl.insertBefore(li, at);
      }
      prev = li;
    }
    pendingEmptyEl.hidden = list.length > 0;
    pendingCountEl.textContent = list.length > 0 ? '(' + list.length + ')' : '';
    announce(list);
    updateBulk();
    tick();
  }

  // ---- notifications ----

  // A new pending approval raises a notification where the browser allows
  // it (the person asked with "Notify me") and the tab is not in front.
  // The first state only sets what is known; nothing is announced for it.
  const notifyEl = document.getElementById('notify');
  let announced = null;
  function canNotify() {
    return typeof window.Notification === 'function' && window.Notification.permission === 'granted';
  }
  function showNotify() {
    notifyEl.hidden = typeof window.Notification !== 'function' || window.Notification.permission !== 'default';
  }
  notifyEl.addEventListener('click', function () {
    window.Notification.requestPermission().then(showNotify, showNotify);
  });
  showNotify();
  function announce(list) {
    const first = announced === null;
    const seen = new Set(list.map(function (a) { return a.id; }));
    if (!first && canNotify() && document.visibilityState !== 'visible') {
      for (const a of list) {
        if (announced.has(a.id)) {
          continue;
        }
        const act = a.action || {};
        const n = new window.Notification('tandem: approval needed in ' + text(act.sessionName), {
          body: text(act.command) || text(act.tool), tag: text(a.id),
        });
        n.onclick = function () { window.focus(); n.close(); };
      }
    }
    announced = seen;
  }

  // ---- several at once ----

  const bulkEl = document.getElementById('bulk');
  function selectedCards() {
    const out = [];
    for (const li of cards.values()) {
      const box = li.querySelector('input.select');
      if (box && box.checked && !box.disabled) {
        out.push(li);
      }
    }
    return out;
  }
  function updateBulk() {
    const n = selectedCards().length;
    bulkEl.hidden = n === 0;
    document.getElementById('selected-count').textContent = n === 1 ? '1 selected' : n + ' selected';
  }
  function decideSelected(yes) {
    for (const li of selectedCards()) {
      li.querySelector('input.select').disabled = true;
      li.decide(yes, false);
    }
    updateBulk();
  }
  document.getElementById('approve-selected').addEventListener('click', function () { decideSelected(true); });
  document.getElementById('deny-selected').addEventListener('click', function () { decideSelected(false); });

  // ---- recently decided ----

  function verdict(a) {
    if (!a) {
      return '';
    }
    const d = a.decision || {};
    let s = text(a.status);
    if (d.by) {
      s += ' by ' + d.by + (d.approver ? ' (' + d.approver + ')' : '');
    }
    if (d.reason) {
      s += ': ' + d.reason;
    }
    return s;
  }

  // rememberMinutes reads how long an approval is remembered
  // (rememberMs, in milliseconds).
  function rememberMinutes(d) {
    return Math.round((Number(d.rememberMs) || 0) / 60000);
  }

  // clockTime is the hour and minute of a time, in the operator's zone.
  function clockTime(iso) {
    const d = new Date(text(iso));
    return isNaN(d) ? '?' : d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  }

  function renderRecent(list) {
    const heldIDs = new Set((current.held || []).map(text));
    const items = list.map(function (a) {
      const act = a.action || {};
      const d = a.decision || {};
      const li = el('li', { 'data-id': text(a.id), 'data-status': text(a.status) });
      li.append(el('span', { class: 'verdict', text: text(a.status) }));
      if (d.by) {
        li.append(' by ', el('span', { class: 'by', text: text(d.by) + (d.approver ? ' (' + d.approver + ')' : '') }));
      }
      if (d.at) {
        li.append(' at ' + when(d.at));
      }
      const remembered = rememberMinutes(d);
      if (remembered > 0) {
        li.append(', remembered for ' + remembered + ' min');
      }
      if (heldIDs.has(text(a.id))) {
        // Approved after the agent's call stopped waiting: it runs when
        // the agent repeats the identical call, until the approval expires.
        li.append(el('div', { class: 'held', text: 'approved — the agent\'s next identical call runs it (until ' + clockTime(a.expires) + ')' }));
      }
      // Whose agent asked: tenant and actor where there are (HTTP mode),
      // else the stdio client.
      const whose = act.actor ? text(act.tenant) + ' · ' + text(act.actor) : 'the stdio client';
      const detail = el('div', { class: 'detail' }, [
        text(act.tool) + ' in ' + text(act.sessionName) + ' (' + whose + ') ',
      ]);
      if (act.command) {
        detail.append(el('code', { text: text(act.command) }));
      }
      li.append(detail);
      if (d.reason) {
        li.append(el('div', { class: 'reason' }, ['Reason: ', el('span', { class: 'reason-value', text: text(d.reason) })]));
      }
      return li;
    });
    recentEl.replaceChildren(...items);
    recentEmptyEl.hidden = list.length > 0;
  }

  // ---- sessions ----

  // renderRows updates a table's rows in place, keyed by data-id, so a
  // button under the pointer is not replaced while it is being clicked.
  function renderRows(table, emptyEl, rows, cellsOf, button) {
    const tbody = table.tBodies[0];
    const have = new Map();
    for (const tr of tbody.rows) {
      have.set(tr.dataset.id, tr);
    }
    const want = new Set(rows.map(function (r) { return r.id; }));
    for (const [id, tr] of have) {
      if (!want.has(id)) {
        tr.remove();
      }
    }
    let prev = null;
    for (const row of rows) {
      const cells = cellsOf(row);
      let tr = have.get(row.id);
      if (!tr) {
        tr = el('tr', { 'data-id': text(row.id) });
        for (const c of cells) {
          const code = c.mono ? el('code') : null;
          tr.append(el('td', {}, code ? (c.copy ? [code, ' ', copyButton(code)] : [code]) : []));
        }
        const replay = text(row.replay);
        if (row.ended && replay.indexOf('/replays/') === 0) {
          // The operator's own replay route: a plain link, no key needed.
          tr.append(el('td', {}, [el('a', { href: replay, target: '_blank', rel: 'noopener', class: 'replay-link', text: button })]));
        } else {
          const b = el('button', { type: 'button', 'aria-label': button, text: button });
          b.addEventListener('click', function () { openSession(row.id, b); });
          tr.append(el('td', {}, [b]));
        }
        labelled(table, tr);
      }
      cells.forEach(function (c, i) {
        const td = tr.cells[i];
        const target = c.mono ? td.firstChild : td;
        if (target.textContent !== c.text) {
          target.textContent = c.text;
        }
      });
      const at = prev ? prev.nextSibling : tbody.firstChild;
      if (at !== tr) {
        tbody.insertBefore(tr, at);
      }
      prev = tr;
    }
    table.hidden = rows.length === 0;
    emptyEl.hidden = rows.length > 0;
  }

  function renderSessions(rows, error) {
    sessionsErrorEl.hidden = !error;
    sessionsErrorEl.textContent = text(error);
    renderRows(liveEl, liveEmptyEl, rows.filter(function (r) { return !r.ended; }), function (r) {
      return [
        { text: text(r.tenant) }, { text: text(r.actor) }, { text: text(r.name) }, { text: text(r.target) },
        { text: (r.humanRequest ? 'needs you: ' + text(r.humanRequest) : text(r.status)) +
          (Array.isArray(r.connections) && r.connections.length > 0 ? '; connected to ' + r.connections.map(text).join(', ') : '') },
        { text: text(r.lastCommand), mono: true }, { text: when(r.lastActivity) },
        { text: 'tandem attach ' + text(r.id), mono: true, copy: true },
      ];
    }, 'Watch');
    renderRows(endedEl, endedEmptyEl, rows.filter(function (r) { return r.ended; }), function (r) {
      return [
        { text: text(r.tenant) }, { text: text(r.actor) }, { text: text(r.name) }, { text: text(r.target) },
        { text: text(r.lastCommand), mono: true }, { text: when(r.endedAt) }, { text: endReason(r.endReason) },
      ];
    }, 'Replay');
  }

  // endReason says in words why a session ended, with tandem's own name
  // for it (as the audit log and the agent's session_ended carry it).
  const endReasons = {
    disconnected: 'the agent disconnected',
    idle_timeout: 'idle for too long',
    max_lifetime: 'reached its maximum lifetime',
    connection_lost: 'the connection was lost',
    shell_exited: 'its shell exited',
    human_exit: 'the human ended its shell',
    server_shutdown: 'tandem shut down',
    server_restart: 'tandem restarted',
    node_lost: 'its tandem node was lost',
  };
  function endReason(code) {
    const c = text(code);
    if (c === '') {
      return 'unknown';
    }
    return Object.prototype.hasOwnProperty.call(endReasons, c) ? endReasons[c] + ' (' + c + ')' : c;
  }

  // openSession asks for the session's monitoring URL and opens it in a new
  // tab. The tab is opened at the click, while the browser still counts it
  // as the operator's doing, and sent on once the URL is known.
  function openSession(id, button) {
    const w = window.open('', '_blank');
    button.disabled = true;
    postJSON('/api/sessions/' + encodeURIComponent(id) + '/watch', {}).then(function (r) {
      button.disabled = false;
      if (r.status === 401) {
        signOut();
      }
      const url = text(r.data.url);
      if (!r.ok || url.indexOf('/s/') !== 0) {
        if (w) {
          w.close();
        }
        notice(text(r.data.message) || 'The session could not be opened (' + r.status + ').');
        return;
      }
      if (w) {
        w.opener = null;
        w.location.replace(url);
      } else {
        notice('The browser blocked the new tab.', el('a', { href: url, target: '_blank', rel: 'noopener', text: 'Open the session' }));
      }
    }, function () {
      button.disabled = false;
      if (w) {
        w.close();
      }
      notice('tandem could not be reached; try again.');
    });
  }

  // ---- audit ----

  let auditLoading = false;
  let auditLast = 0;
  let auditTimer = null;

  // The audit table is read a page at a time, newest first; Older records
  // adds the page before the oldest shown. While older pages are shown the
  // table is not reloaded on every change; a search starts again.
  const auditPage = 100;
  const olderEl = document.getElementById('audit-older');
  let auditShown = [];
  let auditPaged = false;

  function loadAudit(older) {
    if (!auditForm || auditLoading || (auditPaged && !older)) {
      return;
    }
    auditLoading = true;
    auditLast = Date.now();
    const params = new URLSearchParams();
    for (const name of ['session', 'tenant', 'tool', 'outcome']) {
      const v = auditForm.elements[name].value.trim();
      if (v) {
        params.set(name, v);
      }
    }
    params.set('limit', String(auditPage));
    if (older && auditShown.length > 0) {
      params.set('before', String(auditShown[auditShown.length - 1].seq));
    }
    fetch('/api/audit?' + params.toString(), { credentials: 'same-origin', cache: 'no-store' }).then(function (res) {
      if (res.status === 401) {
        signOut();
      }
      return res.json().then(function (data) { return { ok: res.ok, data: data }; });
    }).then(function (r) {
      if (!r.ok) {
        auditStatusEl.textContent = text(r.data.message) || 'The audit log could not be searched.';
        return;
      }
      const page = r.data.records || [];
      if (older) {
        auditPaged = true;
        auditShown = auditShown.concat(page);
      } else {
        auditShown = page;
      }
      olderEl.hidden = page.length < auditPage;
      renderAudit(auditShown);
    }, function () {
      auditStatusEl.textContent = 'tandem could not be reached.';
    }).finally(function () {
      auditLoading = false;
    });
  }
  if (olderEl) {
    olderEl.addEventListener('click', function () { loadAudit(true); });
  }

  function renderAudit(records) {
    const rows = records.map(function (e) {
      return labelled(auditEl, el('tr', {}, [
        when(e.time), e.tenant, e.actor, e.sessionName, e.tool, e.command, e.event, e.outcome, e.reason, e.approvalId,
      ].map(function (v, i) {
        return i === 5 ? el('td', {}, [el('code', { text: text(v) })]) : el('td', { text: text(v) });
      })));
    });
    auditEl.tBodies[0].replaceChildren(...rows);
    auditEl.hidden = records.length === 0;
    auditStatusEl.textContent = records.length === 0 ? 'No record matches.'
      : records.length + (records.length === 1 ? ' record.' : ' records, newest first.');
  }

  // auditSoon reloads the audit table after a change, at most every
  // auditEvery ms.
  function auditSoon() {
    if (!auditForm || auditTimer) {
      return;
    }
    auditTimer = setTimeout(function () {
      auditTimer = null;
      loadAudit();
    }, Math.max(0, auditLast + auditEvery - Date.now()));
  }

  if (auditForm) {
    auditForm.addEventListener('submit', function (ev) {
      ev.preventDefault();
      auditPaged = false; // a search starts from the newest again
      loadAudit();
    });
    loadAudit();
  }

  // ---- state and connection ----

  function render() {
    renderPending(current.pending);
    renderRecent(current.recent);
    renderSessions(current.sessions, current.sessionsError);
  }

  function apply(st) {
    const now = Date.parse(st.now);
    if (!isNaN(now)) {
      skew = now - Date.now();
    }
    current = {
      now: st.now,
      pending: st.pending || [],
      recent: st.recent || [],
      held: st.held || [],
      sessions: st.sessions || [],
      sessionsError: st.sessionsError || '',
    };
    render();
    auditSoon();
  }

  function connect() {
    if (state === 'signedout') {
      return;
    }
    const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
    const sock = new WebSocket(scheme + location.host + '/api/ws');
    ws = sock;
    sock.onmessage = function (ev) {
      let m;
      try {
        m = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      if (m && m.t === 'state') {
        retries = 0;
        setStatus('live', 'live');
        apply(m);
      }
    };
    sock.onclose = function () {
      if (ws !== sock) {
        return;
      }
      ws = null;
      setStatus('disconnected', 'disconnected: reconnecting…');
      reconnect();
    };
  }

  // reconnect tries again after a growing pause. A refused upgrade looks
  // like any other failure, so it asks the API first whether the page is
  // still signed in; the state it gets is shown meanwhile.
  function reconnect() {
    const delay = Math.min(10000, 500 * Math.pow(2, retries));
    retries++;
    setTimeout(function () {
      fetch('/api/state', { credentials: 'same-origin', cache: 'no-store' }).then(function (res) {
        if (res.status === 401) {
          signOut();
          return;
        }
        if (res.ok) {
          return res.json().then(apply);
        }
      }).catch(function () {}).finally(connect);
    }, delay);
  }

  setInterval(tick, 500);
  connect();

  // For tests and the curious.
  window.tandem = {
    status: function () { return state; },
    text: function () { return document.body.innerText; },
  };
})();
