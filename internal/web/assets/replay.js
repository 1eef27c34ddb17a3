// The replay of an ended tandem session.
//
// The page's own URL is the capability (/s/{key}); the recording, an
// asciicast v2 file, lives beside it at /s/{key}/cast. The page fetches it,
// then plays its output ("o") events into the terminal at the recorded
// timing, scaled by the chosen speed, and applies its resize ("r") events.
// Input ("i") and marker ("m") events are not shown: the output already holds
// what the human saw, echo included.
'use strict';

(function () {
  // Sizes outside this range in a recording are ignored.
  const maxDimension = 1000;
  // A wait longer than this is taken in steps, each re-reading the clock.
  const maxSleep = 60000;

  const progressEl = document.getElementById('progress');
  const speedEl = document.getElementById('speed');
  const againEl = document.getElementById('again');
  const term = new Terminal({
    cursorBlink: false,
    disableStdin: true,
    scrollback: 10000,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    fontSize: 14,
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
      }
    }
    return { width: header.width, height: header.height, duration: at, events: events };
  }

  function speed() {
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
    }
  }

  function clockText(secs) {
    const s = Math.floor(secs);
    return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  }

  function showProgress() {
    if (state === 'playing' && clock) {
      const at = clock.speed === Infinity ? played : Math.min(now(), cast.duration);
      progressEl.textContent = 'playing ' + clockText(at) + ' / ' + clockText(cast.duration);
    }
  }

  // play plays the whole recording from the start, until it ends or another
  // playback starts. Output due at the same moment is written in one piece.
  async function play() {
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
    played = 0;
    clock = { at: 0, since: performance.now(), speed: speed() };
    const events = cast.events;
    let i = 0;
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
    setState('finished', 'finished · ' + clockText(cast.duration));
  }

  speedEl.addEventListener('change', rebase);
  againEl.addEventListener('click', function () {
    if (cast) {
      play();
    }
  });
  setInterval(showProgress, 250);

  // Hooks for tests and curious humans: nothing here that the page does not
  // already show.
  window.tandem = {
    term: term,
    status: function () { return state; },
    done: function () { return state === 'finished'; },
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
      play();
    })
    .catch(function (err) {
      setState('failed', 'failed: ' + err.message);
    });
})();
