// babelgate inspector: the list of runs and one run's events side by side.
// Plain DOM, no framework: the page is served from the binary under a strict
// CSP. Every text shown comes from an upstream or a client, so it is only
// ever set with textContent / text nodes, never parsed as HTML.
'use strict';

(() => {
  const POLL_MS = 1000;
  const FETCH_TIMEOUT_MS = 10_000;
  const PREVIEW_CHARS = 180;

  const MARKS = {
    dropped: 'an upstream event that reached no client event',
    synthesized: 'client events with no upstream event behind them',
    merged: 'one client event made from several upstream events (shown at the last of them)',
    error: 'the stream failed here',
  };
  const STATUS_TEXT = {
    streaming: 'streaming',
    completed: 'completed',
    failed: 'failed',
    client_gone: 'client gone',
    stopped: 'stopped',
    shutdown: 'shutdown',
  };

  const $ = (sel, root = document) => root.querySelector(sel);

  /** An element; `props` are attributes (plus class/text/on*), children are nodes or text. */
  function h(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props ?? {})) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c == null || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function setText(e, text) {
    if (e.textContent !== text) e.textContent = text;
  }

  // ---- formatting -------------------------------------------------------

  function fmtMs(ms) {
    if (ms == null || Number.isNaN(ms)) return '—';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 10_000) return `${(ms / 1000).toFixed(2)} s`;
    if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
    const m = Math.floor(ms / 60_000);
    return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
  }

  const fmtAt = (ms) => (ms == null ? '' : `+${fmtMs(ms)}`);

  function fmtStarted(iso) {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso ?? '—';
    const now = new Date();
    const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
    return d.toDateString() === now.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
  }

  function fmtBytes(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
    return `${(n / 1024 / 1024).toFixed(1)} MB`;
  }

  function side(s) {
    if (!s) return '?';
    return s.transport && s.transport !== 'sse' ? `${s.dialect} (${s.transport})` : s.dialect;
  }
  const pair = (run) => `${side(run.upstream)} → ${side(run.client)}`;

  /** The JSON of an SSE frame's data, or null. */
  function frameJson(text) {
    const data = String(text ?? '')
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
      .join('\n');
    const src = data || String(text ?? '').trim();
    if (!src || (src[0] !== '{' && src[0] !== '[')) return null;
    try {
      return JSON.parse(src);
    } catch {
      return null;
    }
  }

  /** One short line saying what an event carried (its type left out: it has its own label). */
  function preview(text) {
    const json = frameJson(text);
    let s;
    if (json && typeof json === 'object' && !Array.isArray(json)) {
      const { type: _type, ...rest } = json;
      s = Object.keys(rest).length ? JSON.stringify(rest) : '';
    } else if (json) {
      s = JSON.stringify(json);
    } else {
      s = String(text ?? '').replace(/^data: ?/gm, '').replace(/\s+/g, ' ').trim();
    }
    return s.length > PREVIEW_CHARS ? `${s.slice(0, PREVIEW_CHARS)}…` : s;
  }

  function prettyBody(body) {
    if (body == null || body === '') return '';
    try {
      return JSON.stringify(JSON.parse(body), null, 2);
    } catch {
      return String(body);
    }
  }

  function statusBadge(status) {
    const b = h('span', { class: `badge status status-${status}` });
    if (status === 'streaming') b.append(h('span', { class: 'live-dot', 'aria-hidden': 'true' }));
    b.append(STATUS_TEXT[status] ?? String(status));
    return b;
  }

  // ---- fetching ---------------------------------------------------------

  const apiUrl = (p) => new URL(p, document.baseURI).href;
  const runPath = (id, tail = '') => `api/runs/${encodeURIComponent(id)}${tail}`;

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function getJson(p) {
    let res;
    try {
      res = await fetch(apiUrl(p), {
        headers: { accept: 'application/json' },
        cache: 'no-store',
        signal: typeof AbortSignal.timeout === 'function' ? AbortSignal.timeout(FETCH_TIMEOUT_MS) : undefined,
      });
    } catch (e) {
      throw new ApiError(0, e.name === 'TimeoutError' ? 'the gateway did not answer in time' : 'the gateway cannot be reached');
    }
    if (!res.ok) {
      let msg = res.statusText || 'error';
      try {
        const body = await res.json();
        msg = body?.error?.message ?? msg;
      } catch {
        // not JSON: keep the status text
      }
      throw new ApiError(res.status, `HTTP ${res.status}: ${msg}`);
    }
    return res.json();
  }

  // ---- the status line --------------------------------------------------

  let lastOk = null;

  function announce(text) {
    setText($('#announcer'), text);
  }

  function statusOk(what) {
    if (lastOk === null || $('#status-line').classList.contains('failing')) announce(what);
    lastOk = new Date();
    const line = $('#status-line');
    line.className = 'status-line ok';
    line.textContent = `${what} · updated ${lastOk.toLocaleTimeString()}`;
  }

  function statusFailed(err) {
    const line = $('#status-line');
    line.className = 'status-line failing';
    const since = lastOk ? `; showing what came at ${lastOk.toLocaleTimeString()}` : '';
    line.textContent = `Cannot refresh (${err.message}): retrying every second${since}`;
    announce(`Cannot refresh: ${err.message}`);
  }

  // ---- routing and polling ----------------------------------------------

  // Each view change bumps `generation`; a poll of an older generation stops.
  // The next poll is only scheduled once the previous request has ended, so
  // requests never overlap and a slow gateway is not piled on.
  let generation = 0;
  let timer = null;

  function currentRoute() {
    const m = /^#\/runs\/([^/?#]+)$/.exec(location.hash);
    return m ? { view: 'run', id: decodeURIComponent(m[1]) } : { view: 'list' };
  }

  function schedule(fn, gen) {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (gen === generation) fn(gen);
    }, POLL_MS);
  }

  function show() {
    generation += 1;
    clearTimeout(timer);
    const r = currentRoute();
    const gen = generation;
    $('#list-view').hidden = r.view !== 'list';
    $('#run-view').hidden = r.view !== 'run';
    if (r.view === 'list') {
      document.title = 'Runs · babelgate inspector';
      pollList(gen);
    } else {
      document.title = `Run ${r.id} · babelgate inspector`;
      openRun(r.id);
      pollRun(gen, r.id);
    }
  }

  // ---- the list ---------------------------------------------------------

  const rowsById = new Map();
  let listLoaded = false;

  async function pollList(gen) {
    try {
      const data = await getJson('api/runs');
      if (gen !== generation) return;
      renderList(data);
      listLoaded = true;
      const live = data.runs.filter((r) => r.status === 'streaming').length;
      statusOk(`Live: ${data.runs.length} run${data.runs.length === 1 ? '' : 's'}, ${live} streaming`);
    } catch (e) {
      if (gen !== generation) return;
      statusFailed(e);
      if (!listLoaded) showEmpty('The list of runs could not be loaded yet.');
    } finally {
      if (gen === generation) schedule(pollList, gen);
    }
  }

  const CELLS = [
    ['status', 'Status'],
    ['route', 'Route'],
    ['conversation', 'Conversation / run'],
    ['pair', 'Upstream → client'],
    ['num events-in', 'In'],
    ['num events-out', 'Out'],
    ['num duration', 'Duration'],
    ['num ttfe', 'First event'],
    ['error-code', 'Error'],
    ['instance', 'Instance'],
    ['started', 'Started'],
  ];

  function buildRow(run) {
    const tr = h('tr', { 'data-run-id': run.id });
    for (const [cls, label] of CELLS) tr.append(h('td', { class: cls, 'data-label': label }));
    const link = h('a', { class: 'route-link', href: `#/runs/${encodeURIComponent(run.id)}` });
    tr.querySelector('.route').append(link, h('span', { class: 'run-id' }));
    // The whole row opens the run; the link is what keyboards and screen readers use.
    tr.addEventListener('click', (ev) => {
      if (ev.target.closest('a') || getSelection()?.toString()) return;
      location.hash = `#/runs/${encodeURIComponent(run.id)}`;
    });
    return tr;
  }

  function updateRow(tr, run) {
    const c = (cls) => tr.querySelector(`td.${cls.split(' ').pop()}`);
    tr.dataset.status = run.status;
    const sig = `${run.status}|${run.truncated}|${run.kind}`;
    if (tr.dataset.sig !== sig) {
      tr.dataset.sig = sig;
      const st = c('status');
      st.replaceChildren(statusBadge(run.status));
      if (run.truncated) st.append(' ', h('span', { class: 'badge flag', title: 'the capture reached its size cap: later bytes were not kept', text: 'capture cut' }));
      const link = tr.querySelector('.route-link');
      link.replaceChildren(run.route ?? '?');
      if (run.kind === 'resume') link.append(' ', h('span', { class: 'badge kind', text: 'resume' }));
    }
    setText(tr.querySelector('.run-id'), run.id);
    // The ids the client chose: what a person debugging "chat X" knows.
    setText(c('conversation'), [run.conversation, run.client_run].filter(Boolean).join(' / '));
    setText(c('pair'), pair(run));
    setText(c('events-in'), String(run.events_in ?? 0));
    setText(c('events-out'), String(run.events_out ?? 0));
    setText(c('duration'), fmtMs(run.duration_ms));
    setText(c('ttfe'), fmtMs(run.ttfe_ms));
    setText(c('error-code'), run.error_code ?? '');
    setText(c('instance'), run.instance ?? '');
    const started = c('started');
    setText(started, fmtStarted(run.started_at));
    started.title = run.started_at ?? '';
    tr.dataset.search = [run.id, run.route, run.conversation, run.client_run, run.status, STATUS_TEXT[run.status], run.error_code, pair(run), run.instance, run.kind]
      .filter(Boolean).join(' ').toLowerCase();
  }

  function renderList(data) {
    const body = $('#runs-body');
    const seen = new Set();
    let prev = null;
    for (const run of data.runs ?? []) {
      if (!run || typeof run.id !== 'string') continue;
      let tr = rowsById.get(run.id);
      if (!tr) {
        tr = buildRow(run);
        rowsById.set(run.id, tr);
      }
      updateRow(tr, run);
      seen.add(run.id);
      const want = prev ? prev.nextSibling : body.firstChild;
      if (want !== tr) body.insertBefore(tr, want);
      prev = tr;
    }
    for (const [id, tr] of rowsById) {
      if (!seen.has(id)) {
        tr.remove();
        rowsById.delete(id);
      }
    }
    const cap = data.capturing ?? {};
    const parts = [];
    if (data.instance) parts.push(`instance ${data.instance}`);
    if (typeof cap.sample === 'number') parts.push(cap.sample >= 1 ? 'every run captured' : `${Math.round(cap.sample * 1000) / 10}% of runs captured`);
    if (cap.max_runs) parts.push(`the latest ${cap.max_runs} kept`);
    setText($('#capture-info'), parts.join(' · '));
    applyFilter();
  }

  function showEmpty(text) {
    const empty = $('#runs-empty');
    setText(empty, text);
    empty.hidden = !text;
  }

  function applyFilter() {
    const q = $('#filter').value.trim().toLowerCase();
    const words = q.split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const tr of rowsById.values()) {
      const hit = words.every((w) => tr.dataset.search.includes(w));
      tr.hidden = !hit;
      if (hit) shown += 1;
    }
    const total = rowsById.size;
    setText($('#filter-count'), words.length ? `${shown} of ${total}` : '');
    if (total === 0) showEmpty('No runs yet. Send a request to one of the gateway\'s routes and it appears here as it streams.');
    else if (shown === 0) showEmpty(`No run matches “${q}”.`);
    else showEmpty('');
  }

  // ---- one run ----------------------------------------------------------

  // The detail is built once per run and patched on each poll: a part is
  // rebuilt only when its data changed, so what the reader opened stays open.
  let detail = null;

  function openRun(id) {
    const root = $('#run');
    detail = {
      id,
      parts: {},
      sigs: {},
      rowEls: [],
      rowSigs: [],
      loaded: false,
    };
    const p = detail.parts;
    p.header = h('header', { class: 'run-header' });
    p.errors = h('div', { class: 'errors-slot' });
    p.actions = h('section', { class: 'panel actions', 'aria-label': 'Captures and replay' });
    p.requests = h('section', { class: 'requests', 'aria-label': 'The request' });
    p.legend = legend();
    p.heads = h('div', { class: 'trace-heads', 'aria-hidden': 'true' });
    p.rows = h('div', { class: 'trace-rows' });
    // On a long run, the lines worth reading first are the marked ones.
    const onlyMarked = h('input', { type: 'checkbox', id: 'only-marked' });
    onlyMarked.addEventListener('change', () => p.rows.classList.toggle('only-marked', onlyMarked.checked));
    p.trace = h('section', { class: 'trace', 'aria-labelledby': 'trace-title' },
      h('div', { class: 'trace-title-line' },
        h('h2', { id: 'trace-title', text: 'Events' }),
        h('label', { class: 'toggle', for: 'only-marked' }, onlyMarked, ' Only rows with a mark'),
        p.legend),
      p.heads, p.rows);
    root.replaceChildren(h('p', { class: 'muted loading', text: 'Loading the run…' }));
  }

  async function pollRun(gen, id) {
    let again = true;
    try {
      const data = await getJson(runPath(id));
      if (gen !== generation) return;
      renderRun(data);
      again = data.run?.status === 'streaming';
      statusOk(again ? 'Live: this run is streaming' : `The run ended (${STATUS_TEXT[data.run?.status] ?? data.run?.status}): not refreshing`);
    } catch (e) {
      if (gen !== generation) return;
      if (e.status === 404) {
        again = false;
        $('#run').replaceChildren(h('div', { class: 'panel notice' },
          h('h1', { text: 'This run is not kept' }),
          h('p', { text: `No run “${id}” here: the inspector keeps only the latest runs, and a restarted gateway starts empty.` })));
        statusOk('Run not found');
      } else {
        statusFailed(e);
      }
    } finally {
      if (gen === generation && again) schedule((g) => pollRun(g, id), gen);
    }
  }

  /** Rebuild part `name` with `build()` when `sig` changed. */
  function patch(name, sig, build) {
    if (detail.sigs[name] === sig) return;
    detail.sigs[name] = sig;
    const fresh = build();
    detail.parts[name].replaceWith(fresh);
    detail.parts[name] = fresh;
  }

  function renderRun(data) {
    const run = data.run ?? {};
    if (!detail.loaded) {
      detail.loaded = true;
      const p = detail.parts;
      $('#run').replaceChildren(p.header, p.errors, p.actions, p.requests, p.trace);
    }
    patch('header', JSON.stringify([run, data.heartbeats]), () => runHeader(run, data.heartbeats));
    patch('errors', JSON.stringify(data.errors ?? []), () => errorsBox(data.errors ?? []));
    patch('actions', JSON.stringify([run.id, run.status, run.truncated, data.replay]), () => actions(run, data.replay));
    patch('requests', JSON.stringify(data.request ?? null), () => requests(data.request ?? {}));
    patch('heads', JSON.stringify([run.upstream, run.client]), () => traceHeads(run));
    renderRows(data.rows ?? [], data.errors ?? [], run.status === 'streaming');
  }

  function fact(label, value, cls) {
    return h('div', { class: 'fact' }, h('dt', { text: label }), h('dd', { class: cls }, value));
  }

  function runHeader(run, heartbeats) {
    const title = h('h1', { class: 'run-title' }, statusBadge(run.status), ' ', h('span', { class: 'route', text: run.route ?? '?' }));
    if (run.kind === 'resume') title.append(' ', h('span', { class: 'badge kind', text: 'resume' }));
    if (run.truncated) title.append(' ', h('span', { class: 'badge flag', text: 'capture cut', title: 'the capture reached its size cap: later bytes were not kept' }));
    const started = h('time', { datetime: run.started_at ?? '', title: run.started_at ?? '', text: fmtStarted(run.started_at) });
    const facts = h('dl', { class: 'facts' },
      fact('Upstream → client', pair(run)),
      fact('Started', started),
      fact('Duration', `${fmtMs(run.duration_ms)}${run.status === 'streaming' ? ' so far' : ''}`),
      fact('First event', fmtMs(run.ttfe_ms)),
      fact('Events in / out', `${run.events_in ?? 0} / ${run.events_out ?? 0}`),
      fact('Heartbeats', `${heartbeats ?? 0} sent`),
      fact('Error', run.error_code ?? 'none', run.error_code ? 'error-text' : 'muted'),
      fact('Instance', run.instance ?? '—'));
    return h('header', { class: 'run-header' }, title, h('p', { class: 'run-id muted' }, 'Run ', h('code', { text: run.id ?? '' })), facts);
  }

  function errorsBox(errors) {
    if (!errors.length) return h('div', { class: 'errors-slot' });
    const list = h('ul', {});
    for (const e of errors) {
      const li = h('li', {},
        h('span', { class: 'err-code', text: e.code ?? 'error' }),
        e.at_ms != null ? h('span', { class: 'ev-time', text: ` ${fmtAt(e.at_ms)}` }) : null,
        h('span', { class: 'err-msg', text: e.message ? ` ${e.message}` : '' }));
      if (e.row != null) {
        li.append(' ', h('button', {
          type: 'button',
          class: 'link-button',
          text: `Show row ${e.row}`,
          onclick: () => focusRow(e.row),
        }));
      }
      list.append(li);
    }
    return h('section', { class: 'errors-slot error-box', role: 'alert', 'aria-label': 'Errors' },
      h('h2', { text: errors.length === 1 ? 'The stream failed' : `${errors.length} errors` }), list);
  }

  function focusRow(i) {
    const row = detail.rowEls[i];
    if (!row) return;
    row.scrollIntoView({ block: 'center', behavior: 'smooth' });
    row.focus({ preventScroll: true });
  }

  function actions(run, replay) {
    const id = run.id ?? detail.id;
    const dl = (which, label, hint) => h('a', {
      id: `download-${which}`,
      class: 'button',
      href: apiUrl(runPath(id, `/${which}`)),
      download: true,
      title: hint,
    }, h('span', { 'aria-hidden': 'true', text: '⤓ ' }), label);
    const downloads = h('div', { class: 'downloads' },
      h('h2', { text: 'Captures' }),
      h('div', { class: 'button-row' },
        dl('upstream', 'Upstream capture', 'the bytes the upstream sent, exactly as read'),
        dl('client', 'Client capture', 'the bytes the client got, heartbeats left out'),
        dl('setup', 'Setup', 'the ids and ending babelgate translate needs to replay the run')));
    if (run.status === 'streaming') downloads.append(h('p', { class: 'muted small', text: 'The run is still streaming: a capture taken now holds what came so far.' }));
    if (run.truncated) downloads.append(h('p', { class: 'warn small', text: 'The capture reached its size cap: the files hold only the start of the run.' }));

    const cmd = replay?.command ?? '';
    const code = h('code', { id: 'replay-command', text: cmd });
    const copy = h('button', { type: 'button', class: 'button small-button', text: 'Copy' });
    copy.addEventListener('click', () => copyText(cmd, code, copy));
    let verdict;
    if (replay?.matches === true) verdict = h('p', { class: 'replay-verdict ok' }, h('span', { 'aria-hidden': 'true', text: '✓ ' }), 'Replays to the same bytes the client got.');
    else if (replay?.matches === false) verdict = h('p', { class: 'replay-verdict bad' }, h('span', { 'aria-hidden': 'true', text: '✗ ' }), 'Replaying the capture does not give the client\'s bytes.');
    else verdict = h('p', { class: 'replay-verdict unknown' }, h('span', { 'aria-hidden': 'true', text: '? ' }), run.status === 'streaming' ? 'Not checked yet: the run is still streaming.' : 'Not checked.');
    const replayBox = h('div', { class: 'replay' },
      h('h2', { text: 'Replay' }),
      h('p', { class: 'muted small', text: 'With the three files in the current directory:' }),
      h('div', { class: 'command' }, h('pre', {}, code), copy),
      verdict);
    return h('section', { class: 'panel actions', 'aria-label': 'Captures and replay' }, downloads, replayBox);
  }

  async function copyText(text, codeEl, button) {
    const done = (msg) => {
      button.textContent = msg;
      setTimeout(() => {
        button.textContent = 'Copy';
      }, 2000);
    };
    try {
      await navigator.clipboard.writeText(text);
      done('Copied');
    } catch {
      // No clipboard access: select the command so that Ctrl+C copies it.
      const range = document.createRange();
      range.selectNodeContents(codeEl);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      done('Selected');
    }
  }

  function requests(req) {
    return h('section', { class: 'requests', 'aria-label': 'The request' },
      requestBlock('Request as received', req.received, 'received'),
      requestBlock('Request as sent upstream', req.upstream, 'upstream'));
  }

  function requestBlock(title, r, key) {
    const wasOpen = document.getElementById(`request-${key}`)?.open ?? false;
    const d = h('details', { class: 'panel request', id: `request-${key}`, open: wasOpen });
    if (!r) {
      d.append(h('summary', {}, h('span', { class: 'req-title', text: title }), h('span', { class: 'muted', text: ' not sent' })));
      d.append(h('p', { class: 'muted', text: 'The gateway never sent this request upstream (it was refused or failed before).' }));
      return d;
    }
    const body = r.body ?? '';
    const target = r.url ?? r.path ?? '';
    d.append(h('summary', {},
      h('span', { class: 'req-title', text: title }),
      h('span', { class: 'req-line' }, h('code', { text: `${r.method ?? ''} ${target}` })),
      h('span', { class: 'muted', text: ` ${(r.headers ?? []).length} headers · ${fmtBytes(new TextEncoder().encode(body).length)}` })));
    const table = h('table', { class: 'headers' },
      h('caption', { class: 'visually-hidden', text: `${title}: headers` }),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Header' }), h('th', { scope: 'col', text: 'Value' }))));
    const tbody = h('tbody');
    for (const pairKv of r.headers ?? []) {
      const [name, value] = Array.isArray(pairKv) ? pairKv : [String(pairKv), ''];
      tbody.append(h('tr', {}, h('th', { scope: 'row', text: name }),
        h('td', { class: value === '[redacted]' ? 'redacted' : '', text: value })));
    }
    table.append(tbody);
    d.append(h('h3', { text: 'Headers' }), (r.headers ?? []).length ? table : h('p', { class: 'muted', text: 'none' }));
    d.append(h('h3', { text: 'Body' }));
    if (body === '') d.append(h('p', { class: 'muted', text: 'empty' }));
    else d.append(h('pre', { class: 'body' }, h('code', { text: prettyBody(body) })));
    if (r.body_truncated) d.append(h('p', { class: 'warn small', text: 'The body was cut here: only its start is kept.' }));
    return d;
  }

  function legend() {
    const dl = h('ul', { class: 'legend', 'aria-label': 'What the marks mean' });
    for (const [mark, what] of Object.entries(MARKS)) {
      dl.append(h('li', {}, h('span', { class: `mark-badge mark-${mark}`, text: mark }), ` ${what}`));
    }
    return dl;
  }

  function traceHeads(run) {
    return h('div', { class: 'trace-heads', 'aria-hidden': 'true' },
      h('span', { class: 'gutter', text: 'Row' }),
      h('span', { text: `Upstream · ${side(run.upstream)}` }),
      h('span', { text: 'Core events' }),
      h('span', { text: `Client · ${side(run.client)}` }));
  }

  function renderRows(rows, errors, streaming) {
    const container = detail.parts.rows;
    const errAt = new Map();
    for (const e of errors) {
      if (e.row == null) continue;
      if (!errAt.has(e.row)) errAt.set(e.row, []);
      errAt.get(e.row).push(e);
    }
    rows.forEach((row, i) => {
      const sig = JSON.stringify([row, errAt.get(i) ?? null]);
      if (detail.rowSigs[i] === sig) return;
      detail.rowSigs[i] = sig;
      const el = traceRow(row, i, errAt.get(i) ?? [], detail.rowEls[i]);
      if (detail.rowEls[i]) detail.rowEls[i].replaceWith(el);
      else container.append(el);
      detail.rowEls[i] = el;
    });
    while (detail.rowEls.length > rows.length) {
      detail.rowEls.pop().remove();
      detail.rowSigs.pop();
    }
    let note = container.nextElementSibling;
    if (!note || !note.classList.contains('trace-note')) {
      note = h('p', { class: 'trace-note muted' });
      container.after(note);
    }
    setText(note, rows.length === 0
      ? (streaming ? 'No event yet: waiting for the upstream.' : 'No event was captured for this run.')
      : (streaming ? 'The run is still streaming: new events appear here as they come.' : ''));
  }

  function traceRow(row, i, errs, old) {
    const marks = (Array.isArray(row.marks) ? row.marks : []).filter((m) => typeof m === 'string');
    if (errs.length && !marks.includes('error')) marks.push('error');
    const el = h('div', {
      class: `trace-row${marks.map((m) => ` mark-${m}`).join('')}`,
      'data-marks': marks.join(' '),
      'data-row': i,
      tabindex: '-1',
      role: 'group',
      'aria-label': `Row ${i}${marks.length ? `: ${marks.join(', ')}` : ''}`,
    });
    const gutter = h('div', { class: 'gutter' }, h('span', { class: 'row-no', text: `#${i}` }));
    for (const m of marks) gutter.append(h('span', { class: `mark-badge mark-${m}`, text: m }));
    el.append(gutter);

    const up = h('div', { class: 'cell upstream' }, h('span', { class: 'cell-label', text: 'Upstream' }));
    if (row.upstream) up.append(eventItem(row.upstream, 'upstream', true));
    else up.append(h('span', { class: 'none', text: 'no upstream event' }));
    const core = h('div', { class: 'cell core' }, h('span', { class: 'cell-label', text: 'Core' }));
    if (row.core?.length) for (const c of row.core) core.append(eventItem(c, 'core', false));
    else core.append(h('span', { class: 'none', text: '—' }));
    const client = h('div', { class: 'cell client' }, h('span', { class: 'cell-label', text: 'Client' }));
    if (row.client?.length) for (const c of row.client) client.append(eventItem(c, 'client', true));
    else client.append(h('span', { class: 'none', text: marks.includes('dropped') ? 'nothing sent' : '—' }));
    el.append(up, core, client);

    for (const e of errs) {
      el.append(h('div', { class: 'row-error' },
        h('span', { class: 'err-code', text: e.code ?? 'error' }),
        e.at_ms != null ? h('span', { class: 'ev-time', text: ` ${fmtAt(e.at_ms)}` }) : null,
        h('span', { text: e.message ? ` ${e.message}` : '' })));
    }
    // Keep what the reader unfolded when a streaming row is redrawn.
    if (old) {
      const open = new Set([...old.querySelectorAll('details[open]')].map((d) => d.dataset.key));
      for (const d of el.querySelectorAll('details')) if (open.has(d.dataset.key)) d.open = true;
    }
    return el;
  }

  let evKey = 0;
  function eventItem(ev, where, timed) {
    const text = String(ev.text ?? '');
    const summary = h('summary', {},
      h('span', { class: `ev-type ev-${where}`, text: ev.type ?? '?' }),
      timed && ev.at_ms != null ? h('span', { class: 'ev-time', text: fmtAt(ev.at_ms) }) : null,
      timed && ev.seq != null ? h('span', { class: 'ev-seq', title: 'sequence number', text: `#${ev.seq}` }) : null,
      h('span', { class: 'ev-preview', text: preview(text) }));
    const key = `${where}:${ev.seq ?? ''}:${ev.type ?? ''}:${evKey++}`;
    const d = h('details', { class: 'ev', 'data-key': key.replace(/:\d+$/, '') });
    // The frame's closing blank line is not shown: it only pads the box.
    d.append(summary, h('pre', { class: 'ev-text' }, h('code', { text: text.replace(/\n+$/, '') })));
    return d;
  }

  // ---- start ------------------------------------------------------------

  function start() {
    $('#filter').addEventListener('input', applyFilter);
    window.addEventListener('hashchange', show);
    show();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
