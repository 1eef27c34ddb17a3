// The replay of an ended tandem session.
//
// The page's own URL is the capability (/s/{key}); the recording, an
// asciicast v2 file, lives beside it at /s/{key}/cast. The page fetches it,
// then plays its output ("o") events into the terminal at the recorded
// timing, scaled by the chosen speed, and applies its resize ("r") events.
// Input ("i") events are not shown: the output already holds what the human
// saw, echo included. Marker ("m") events, which tandem writes where each
// command starts ("agent: LINE", "human: LINE") and ends ("end agent: 0"),
// become marks on the seek bar: agent and human in their own colours, a
// click jumps there. Play and pause, the seek bar, and #t=SECONDS in the
// address (Link here) move through the recording.
'use strict';

(function () {
  // Sizes outside this range in a recording are ignored.
  const maxDimension = 1000;
  // A wait longer than this is taken in steps, each re-reading the clock.
  const maxSleep = 60000;

  const progressEl = document.getElementById('progress');
  const speedEl = document.getElementById('speed');
  const againEl = document.getElementById('again');
  const pauseEl = document.getElementById('pause');
  const seekEl = document.getElementById('seek');
  const marksEl = document.getElementById('marks');
  const linkEl = document.getElementById('link');
  let paused = false;
  let seeking = false; // the person is dragging the seek bar
  const term = new Terminal({
    cursorBlink: false,
    disableStdin: true,
    scrollback: 10000,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    fontSize: 14, // see fit
    lineHeight: 1.2, // room for underscores under the baseline, as on the live page
    theme: { background: '#0d1117', foreground: '#c9d1d9', cursor: '#c9d1d9' },
  });
  term.open(document.getElementById('terminal'));

  let cast = null; // {width, height, duration, events: [{t, code, data}]}, t in seconds
  let state = 'loading'; // loading, playing, finished, failed
  let run = 0; // the current playback; starting another makes older ones stop
  let clock = null; // {at: cast time at wall time since, since, speed}
  let played = 0; // cast time of the last event played
  let wake = null; // ends the current wait early

  function setState(next, text) {
    state = next;
    progressEl.textContent = text;
  }

  // parse reads an asciicast v2 file. Times become playback times: pauses
  // longer than the header's idle_time_limit, if any, are shortened to it.
  // An unparsable last line without a newline, a recording cut short, is
  // dropped; any other bad line fails the whole file.
  function parse(text) {
    const lines = text.split('\n');
    const cutShort = lines[lines.length - 1] !== '';
    if (!cutShort) {
      lines.pop();
    }
    const header = JSON.parse(lines[0]);
    if (!header || header.version !== 2 || !(header.width > 0) || !(header.height > 0)) {
      throw new Error('not an asciicast v2 recording');
    }
    const idle = header.idle_time_limit > 0 ? header.idle_time_limit : Infinity;
    const events = [];
    const marks = [];
    let last = 0;
    let at = 0;
    for (let i = 1; i < lines.length; i++) {
      let ev;
      try {
        ev = JSON.parse(lines[i]);
      } catch (err) {
        if (cutShort && i === lines.length - 1) {
          break;
        }
        throw new Error('line ' + (i + 1) + ': ' + err.message);
      }
      if (!Array.isArray(ev) || typeof ev[0] !== 'number' || typeof ev[1] !== 'string' || typeof ev[2] !== 'string') {
        throw new Error('line ' + (i + 1) + ': not an event');
      }
      at += Math.min(Math.max(ev[0] - last, 0), idle);
      last = Math.max(last, ev[0]);
      if (ev[1] === 'o' || ev[1] === 'r') {
        events.push({ t: at, code: ev[1], data: ev[2] });
      } else if (ev[1] === 'm') {
        marks.push({ t: at, label: ev[2] });
      }
    }
    return { width: header.width, height: header.height, duration: at, events: events, marks: marks };
  }

  function speed() {
    if (paused) {
      return 0;
    }
    return speedEl.value === 'instant' ? Infinity : Number(speedEl.value);
  }

  // now is the cast time the playback has reached.
  function now() {
    if (clock.speed === Infinity) {
      return Infinity;
    }
    return clock.at + (performance.now() - clock.since) / 1000 * clock.speed;
  }

  // rebase restarts the clock from where the playback is, at the chosen speed.
  function rebase() {
    if (!clock) {
      return;
    }
    const at = clock.speed === Infinity ? played : Math.min(now(), cast.duration);
    clock = { at: at, since: performance.now(), speed: speed() };
    if (wake) {
      wake();
    }
  }

  function sleep(ms) {
    return new Promise(function (resolve) {
      const timer = setTimeout(done, Math.min(ms, maxSleep));
      function done() {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
      wake = done;
    });
  }

  // write resolves once xterm.js has processed data, so what follows (a
  // resize, a reset) applies after it, not before.
  function write(data) {
    return new Promise(function (resolve) { term.write(data, resolve); });
  }

  function resize(data) {
    const m = /^(\d+)x(\d+)$/.exec(data);
    const cols = m ? Number(m[1]) : 0;
    const rows = m ? Number(m[2]) : 0;
    if (cols > 0 && rows > 0 && cols <= maxDimension && rows <= maxDimension) {
      term.resize(cols, rows);
      fit();
    }
  }

  // fit keeps the recorded columns but draws them smaller when they are
  // wider than the window (a phone), so that every row shows whole rather
  // than clipped at the window's edge; never larger than fontSize.
  // The Actual size button (shown only when the rows were drawn
  // smaller) draws them at fontSize again, the terminal's box scrolling
  // sideways; pressed again, it fits them back.
  const fontSize = 14;
  const minFontSize = 4;
  const zoomEl = document.getElementById('zoom');
  let actualSize = false;
  zoomEl.addEventListener('click', function () {
    actualSize = !actualSize;
    fit();
  });
  function fit() {
    const box = document.getElementById('terminal');
    const screen = box.querySelector('.xterm-screen');
    if (!screen) {
      return;
    }
    let size = fontSize;
    if (actualSize) {
      term.options.fontSize = size;
      zoomEl.setAttribute('aria-pressed', 'true');
      return;
    }
    zoomEl.setAttribute('aria-pressed', 'false');
    zoomEl.hidden = true;
    // Measured at each try: the cell's width does not scale exactly
    // with the font size, so shrink until it fits.
    for (let i = 0; i < 8; i++) {
      if (term.options.fontSize !== size) {
        term.options.fontSize = size;
      }
      const width = screen.getBoundingClientRect().width;
      const pad = getComputedStyle(box);
      const room = box.clientWidth - parseFloat(pad.paddingLeft) - parseFloat(pad.paddingRight);
      if (width <= room || size <= minFontSize || width === 0) {
        zoomEl.hidden = size === fontSize;
        return;
      }
      size = Math.max(minFontSize, Math.floor(size * room / width * 10 - (i > 0 ? 1 : 0)) / 10);
    }
    zoomEl.hidden = false;
  }
  let fitTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(fitTimer);
    fitTimer = setTimeout(fit, 100);
  });

  function clockText(secs) {
    const s = Math.floor(secs);
    return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  }

  // position is the cast time the playback shows now.
  function position() {
    if (!clock) {
      return 0;
    }
    return clock.speed === Infinity ? played : Math.min(now(), cast.duration);
  }

  function showProgress() {
    if (state === 'playing' && clock) {
      const at = position();
      progressEl.textContent = (paused ? 'paused ' : 'playing ') + clockText(at) + ' / ' + clockText(cast.duration);
      if (!seeking) {
        seekEl.value = String(at);
      }
    }
  }

  // play plays the recording from the cast time from (0: the start), until
  // it ends or another playback starts: what comes before from is written
  // at once. Output due at the same moment is written in one piece.
  async function play(from) {
    from = Math.min(Math.max(Number(from) || 0, 0), cast.duration);
    const mine = ++run;
    setState('playing', 'playing');
    if (wake) {
      wake(); // the older playback notices it was replaced
    }
    await write(''); // let output an older playback queued land before the reset
    if (mine !== run) {
      return;
    }
    term.reset();
    resize(cast.width + 'x' + cast.height);
    const events = cast.events;
    let i = 0;
    let out = '';
    for (; i < events.length && events[i].t <= from; i++) {
      if (events[i].code === 'o') {
        out += events[i].data;
      } else {
        await write(out);
        out = '';
        resize(events[i].data);
      }
    }
    await write(out);
    if (mine !== run) {
      return;
    }
    played = from;
    clock = { at: from, since: performance.now(), speed: speed() };
    while (i < events.length) {
      const at = now();
      if (events[i].t > at) {
        await sleep((events[i].t - at) / clock.speed * 1000);
      } else {
        let out = '';
        for (; i < events.length && events[i].t <= at && events[i].code === 'o'; i++) {
          out += events[i].data;
          played = events[i].t;
        }
        if (out !== '') {
          await write(out);
        }
        if (mine === run && i < events.length && events[i].t <= at && events[i].code !== 'o') {
          if (events[i].code === 'r') {
            resize(events[i].data);
          }
          played = events[i].t;
          i++;
        }
      }
      if (mine !== run) {
        return;
      }
    }
    seekEl.value = String(cast.duration);
    setState('finished', 'finished · ' + clockText(cast.duration));
  }

  // The player's controls.
  function setPaused(p) {
    paused = p;
    pauseEl.textContent = p ? 'Play' : 'Pause';
    pauseEl.setAttribute('aria-pressed', p ? 'true' : 'false');
    rebase();
  }
  function seek(t) {
    if (cast) {
      play(t);
    }
  }
  speedEl.addEventListener('change', rebase);
  againEl.addEventListener('click', function () {
    if (cast) {
      setPaused(false);
      play(0);
    }
  });
  pauseEl.addEventListener('click', function () {
    if (!cast) {
      return;
    }
    if (state === 'finished') {
      setPaused(false);
      play(0);
      return;
    }
    setPaused(!paused);
  });
  seekEl.addEventListener('input', function () { seeking = true; });
  seekEl.addEventListener('change', function () {
    seeking = false;
    seek(Number(seekEl.value));
  });
  linkEl.addEventListener('click', function () {
    const t = position().toFixed(1);
    history.replaceState(null, '', '#t=' + t);
    linkEl.textContent = 'Linked at ' + clockText(Number(t));
  });

  // showMarks puts a mark on the seek bar for each command's start: its
  // label (the command line) as its name, agent and human apart.
  function showMarks() {
    const items = [];
    for (const m of cast.marks) {
      const who = /^(agent|human): /.exec(m.label);
      if (!who) {
        continue;
      }
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'mark ' + who[1];
      b.dataset.source = who[1];
      b.dataset.t = String(m.t);
      b.title = m.label + ' (' + clockText(m.t) + ')';
      b.setAttribute('aria-label', m.label);
      b.style.left = (cast.duration > 0 ? m.t / cast.duration * 100 : 0) + '%';
      b.addEventListener('click', function () { seek(m.t); });
      items.push(b);
    }
    marksEl.replaceChildren(...items);
  }

  // A link to another moment of this recording, opened in this tab.
  window.addEventListener('hashchange', function () { seek(startAt()); });

  // startAt is the #t=SECONDS of the address, or 0.
  function startAt() {
    const m = /^#t=(\d+(?:\.\d+)?)$/.exec(location.hash);
    return m ? Number(m[1]) : 0;
  }
  setInterval(showProgress, 250);

  // Hooks for tests and curious humans: nothing here that the page does not
  // already show.
  window.tandem = {
    term: term,
    status: function () { return state; },
    done: function () { return state === 'finished'; },
    position: position,
    marks: function () { return cast ? cast.marks : []; },
    text: function () {
      const buf = term.buffer.active;
      const lines = [];
      for (let i = 0; i < buf.length; i++) {
        lines.push(buf.getLine(i).translateToString(true));
      }
      return lines.join('\n');
    },
  };

  const castURL = location.pathname.replace(/\/+$/, '') + '/cast';
  fetch(castURL, { cache: 'no-store', credentials: 'same-origin' })
    .then(function (resp) {
      if (!resp.ok) {
        throw new Error('the recording is gone (' + resp.status + ')');
      }
      return resp.text();
    })
    .then(function (text) {
      cast = parse(text);
      seekEl.max = String(cast.duration);
      showMarks();
      play(startAt());
    })
    .catch(function (err) {
      setState('failed', 'failed: ' + err.message);
    });
})();
