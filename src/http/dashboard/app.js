// The dagent dashboard: a hash-routed single page over the HTTP API, no build step.
// Every call sends the admin token kept in localStorage; live views read the
// server-sent event stream with fetch (EventSource cannot send a header).
// All text goes into the DOM through textContent / text nodes: task outputs and
// errors are untrusted.
import { renderSvg, setNodeStatus, sameShape, STATUS_ORDER, statusLabel } from './graph.js';

const TOKEN_KEY = 'dagent.token';
/** Wait before reconnecting a dropped event stream (the server's `retry:` says the same). */
const RECONNECT_MS = 2000;
/** Coalesce bursts of stream events into one refetch at most this often. */
const REFETCH_MS = 250;
/** A heartbeat older than this is shown in red. */
const STALE_HEARTBEAT_SEC = 60;
/** While no event stream is connected, live pages refetch this often instead. */
const OFFLINE_POLL_MS = 10_000;
/** The agents page refetches this often (heartbeats write no events). */
const AGENTS_REFRESH_MS = 5000;

const main = document.getElementById('main');

// ---------------------------------------------------------------- token

function tokenGet() {
  return localStorage.getItem(TOKEN_KEY) ?? '';
}

function tokenSet(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** `#token=…` in the URL: keep it, then drop it from the address bar and the history. */
function tokenFromFragment() {
  const m = /^#token=([^&]+)/.exec(location.hash);
  if (!m) return;
  tokenSet(decodeURIComponent(m[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** One API call; a non-2xx answer throws ApiError with the server's code and message. */
async function api(method, path, body) {
  const headers = { authorization: `Bearer ${tokenGet()}` };
  let payload;
  if (method !== 'GET') {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body ?? {});
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
  } catch (err) {
    throw new ApiError(0, 'NETWORK', `cannot reach the server (${err.message})`);
  }
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    const e = json && typeof json === 'object' && json.error ? json.error : {};
    const err = new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? (text || res.statusText), json);
    if (res.status === 401) signOut(`The token was refused: ${err.message}`);
    throw err;
  }
  return json;
}

function errorText(err) {
  if (err instanceof ApiError) return `${err.status ? `${err.status} ` : ''}${err.code}: ${err.message}`;
  return String(err?.message ?? err);
}

// ---------------------------------------------------------------- event stream

let liveStreams = 0;
function liveChanged(delta) {
  liveStreams += delta;
  const el = document.getElementById('live');
  el.textContent = liveStreams > 0 ? 'live' : 'offline';
  el.classList.toggle('on', liveStreams > 0);
}

/** Parse `text/event-stream` chunks; calls onEvent({type, data}) per complete event. */
export function sseParser(onEvent) {
  let buf = '';
  let type = '';
  let data = [];
  return (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length) {
          const raw = data.join('\n');
          let parsed = raw;
          try { parsed = JSON.parse(raw); } catch { /* plain text */ }
          try { onEvent({ type: type || 'message', data: parsed }); } catch (err) { console.error('stream handler failed', err); }
        }
        type = '';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue; // keepalive comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
    }
  };
}

/**
 * Read /api/events (with `query`, e.g. `?dag_id=…`) until stopped, reconnecting
 * RECONNECT_MS after an error or the end of the stream. Returns the stop function.
 */
function streamOpen(query, onEvent) {
  let stopped = false;
  let ctrl;
  let timer;
  const run = async () => {
    if (stopped) return;
    ctrl = new AbortController();
    let connected = false;
    try {
      const res = await fetch(`/api/events${query}`, {
        headers: { authorization: `Bearer ${tokenGet()}`, accept: 'text/event-stream' }, signal: ctrl.signal, cache: 'no-store',
      });
      if (res.status === 401) {
        signOut('The token was refused by the event stream.');
        return;
      }
      if (!res.ok || !res.body) throw new Error(`event stream answered ${res.status}`);
      connected = true;
      liveChanged(+1);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      const push = sseParser(onEvent);
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        push(decoder.decode(value, { stream: true }));
      }
    } catch (err) {
      if (!stopped && err?.name !== 'AbortError') console.warn('event stream:', err?.message ?? err);
    } finally {
      if (connected) liveChanged(-1);
    }
    if (!stopped) timer = setTimeout(run, RECONNECT_MS);
  };
  void run();
  return () => {
    stopped = true;
    clearTimeout(timer);
    ctrl?.abort();
  };
}

/** The unfiltered stream: DAG progress and every event, for the nav count and the DAG list. */
const globalListeners = new Set();
let globalStop;
const DLQ_EVENTS = new Set(['task.dead_lettered', 'dlq.retried', 'dlq.cancelled', 'dlq.edited', 'dag.cancelled', 'task.cancelled']);

function globalStreamEnsure() {
  if (globalStop) return;
  globalStop = streamOpen('', (e) => {
    if (DLQ_EVENTS.has(e.type)) dlqCountRefreshSoon();
    for (const l of globalListeners) l(e);
  });
}

// ---------------------------------------------------------------- DOM helpers

/** Build an element. Children that are not Nodes become text nodes (never HTML). */
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'value') e.value = v;
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  add(e, ...children);
  return e;
}

/** Append children (nested arrays flattened; null, undefined and false skipped; strings as text). */
function add(parent, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    parent.append(c instanceof Node ? c : String(c));
  }
  return parent;
}

/** Replace an element's children, with add's rules. */
function fill(parent, ...children) {
  parent.replaceChildren();
  return add(parent, ...children);
}

const link = (href, ...children) => h('a', { href }, ...children);
const hrefDag = (id) => `#/dags/${encodeURIComponent(id)}`;
const hrefTask = (id) => `#/tasks/${encodeURIComponent(id)}`;
const hrefDlq = (id) => (id ? `#/dlq/${encodeURIComponent(id)}` : '#/dlq');

function badge(status, attrs = {}) {
  return h('span', { class: `badge status-${status}`, 'data-status': status, ...attrs }, statusLabel(status));
}

function pre(value, attrs = {}) {
  return h('pre', { class: 'json', ...attrs }, value === undefined ? 'undefined' : typeof value === 'string' ? value : JSON.stringify(value, null, 2));
}

function chips(list) {
  if (!list || list.length === 0) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'chips' }, list.map((c) => h('span', { class: 'chip' }, c)));
}

function table(headers, rows, attrs = {}) {
  return h('table', attrs,
    h('thead', null, h('tr', null, headers.map((x) => h('th', null, x)))),
    h('tbody', null, rows));
}

function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', null, title), ...children);
}

function empty(text) {
  return h('p', { class: 'muted empty' }, text);
}

function usd(n) {
  if (n === null || n === undefined) return '—';
  const v = Number(n);
  return `$${v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(4) : v.toFixed(2)}`;
}

function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, d.toLocaleString());
}

function agoSec(iso) {
  return Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
}

function agoText(sec) {
  if (sec < 120) return `${sec}s ago`;
  if (sec < 7200) return `${Math.round(sec / 60)}m ago`;
  if (sec < 172800) return `${Math.round(sec / 3600)}h ago`;
  return `${Math.round(sec / 86400)}d ago`;
}

function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/** A bar of completed (and running, failed, cancelled) tasks out of the total. */
function progressBar(counts, total) {
  const c = counts ?? {};
  const sum = Object.values(c).reduce((s, n) => s + n, 0);
  const all = Math.max(total || 0, sum);
  const done = c.completed ?? 0;
  const parts = [
    ['completed', done],
    ['running', (c.claimed ?? 0) + (c.running ?? 0) + (c.validating ?? 0)],
    ['retrying', (c.retrying ?? 0) + (c.failed ?? 0)],
    ['dead_lettered', c.dead_lettered ?? 0],
    ['cancelled', c.cancelled ?? 0],
  ];
  const bar = h('div', { class: 'progress', title: Object.entries(c).map(([k, n]) => `${statusLabel(k)}: ${n}`).join(', ') });
  for (const [status, n] of parts) {
    if (!n || !all) continue;
    const seg = h('div', { class: `seg status-${status}` });
    seg.style.width = `${(100 * n) / all}%`;
    bar.append(seg);
  }
  return h('div', { class: 'progress-wrap' }, bar, h('span', { class: 'progress-text' }, `${done}/${all}`));
}

let flashTimer;
function flash(message, kind = 'ok') {
  const el = document.getElementById('flash');
  el.textContent = message;
  el.className = `flash ${kind}`;
  el.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

/** A button that asks again before doing something destructive. */
function confirmButton(label, attrs, action) {
  const btn = h('button', { type: 'button', class: 'danger', ...attrs }, label);
  let armed = false;
  let timer;
  btn.addEventListener('click', async () => {
    if (!armed) {
      armed = true;
      btn.textContent = `Confirm: ${label.toLowerCase()}`;
      timer = setTimeout(() => { armed = false; btn.textContent = label; }, 4000);
      return;
    }
    clearTimeout(timer);
    armed = false;
    btn.textContent = label;
    btn.disabled = true;
    try { await action(); } finally { btn.disabled = false; }
  });
  return btn;
}

// ---------------------------------------------------------------- page context

/** What a page holds while shown: streams, timers and listeners, all stopped when the route changes. */
function pageContext() {
  const cleanups = [];
  const ctx = {
    alive: true,
    onCleanup: (fn) => cleanups.push(fn),
    stream: (query, fn) => cleanups.push(streamOpen(query, fn)),
    onGlobal: (fn) => {
      globalListeners.add(fn);
      cleanups.push(() => globalListeners.delete(fn));
    },
    every: (ms, fn) => {
      const t = setInterval(fn, ms);
      cleanups.push(() => clearInterval(t));
    },
    /** Run `fn` at most every `ms`, always after the latest request; only the newest answer is applied. */
    refetcher: (fn, ms = REFETCH_MS) => {
      let timer;
      let seq = 0;
      const now = async () => {
        const mine = ++seq;
        try {
          const result = await fn.load();
          if (ctx.alive && mine === seq) fn.apply(result);
        } catch (err) {
          if (ctx.alive && mine === seq) fn.fail?.(err);
        }
      };
      cleanups.push(() => clearTimeout(timer));
      return {
        now,
        soon: () => {
          if (timer) return;
          timer = setTimeout(() => { timer = undefined; void now(); }, ms);
        },
      };
    },
    close: () => {
      ctx.alive = false;
      for (const fn of cleanups.splice(0)) {
        try { fn(); } catch { /* already stopped */ }
      }
    },
  };
  return ctx;
}

function pageError(err) {
  return h('div', { class: 'card error-box', role: 'alert' }, h('strong', null, 'Could not load this page. '), errorText(err));
}

// ---------------------------------------------------------------- nav

let dlqCountTimer;
async function dlqCountRefresh() {
  try {
    const { entries } = await api('GET', '/api/dlq?limit=1000');
    const el = document.getElementById('dlq-count');
    el.textContent = entries.length >= 1000 ? '1000+' : String(entries.length);
    el.classList.toggle('alert', entries.length > 0);
  } catch { /* shown on the next success */ }
}

function dlqCountRefreshSoon() {
  if (dlqCountTimer) return;
  dlqCountTimer = setTimeout(() => { dlqCountTimer = undefined; void dlqCountRefresh(); }, REFETCH_MS);
}

function navShow(signedIn, active) {
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('signout').hidden = !signedIn;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.nav === active);
}

// ---------------------------------------------------------------- router

let current;

function signOut(message) {
  tokenSet('');
  globalStop?.();
  globalStop = undefined;
  current?.close();
  current = undefined;
  pageLogin(message);
}

function route() {
  tokenFromFragment();
  current?.close();
  current = undefined;
  if (!tokenGet()) return pageLogin();
  globalStreamEnsure();
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  const ctx = pageContext();
  current = ctx;
  window.scrollTo(0, 0);
  void dlqCountRefresh();
  const [page, id] = parts;
  const pages = {
    '': ['dags', () => pageDags(ctx)],
    dags: ['dags', () => (id ? pageDag(ctx, id) : pageDags(ctx))],
    tasks: ['', () => pageTask(ctx, id)],
    dlq: ['dlq', () => pageDlq(ctx, id)],
    agents: ['agents', () => pageAgents(ctx)],
  };
  const found = Object.hasOwn(pages, page ?? '') ? pages[page ?? ''] : undefined;
  if (found && (page !== 'tasks' || id)) {
    navShow(true, found[0]);
    found[1]();
    return;
  }
  navShow(true, '');
  fill(main, h('div', { class: 'card' }, h('h1', null, 'Not found'), h('p', null, 'No page at ', h('code', null, location.hash), '. ', link('#/', 'Back to the DAGs'))));
}

// ---------------------------------------------------------------- login

function pageLogin(message) {
  navShow(false, '');
  const input = h('input', { type: 'password', id: 'token-input', name: 'token', autocomplete: 'off', placeholder: 'dagent admin token', required: true, size: 48 });
  const msg = h('p', { class: 'error', role: 'alert' }, message ?? '');
  const form = h('form', { class: 'card login', id: 'token-form' },
    h('h1', null, 'Sign in'),
    h('p', { class: 'muted' }, 'Paste an admin token (create one with ', h('code', null, 'dagent tokens create --role admin'), '). It is kept in this browser\'s local storage.'),
    h('label', null, 'Token ', input),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')),
    msg);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    tokenSet(token);
    route();
  });
  fill(main, form);
  input.focus();
}

// ---------------------------------------------------------------- DAG list

function pageDags(ctx) {
  const stats = h('p', { class: 'muted stats' });
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'DAGs'), stats), h('div', { class: 'card flush' }, body));

  const load = ctx.refetcher({
    load: () => Promise.all([api('GET', '/api/dags?limit=100'), api('GET', '/api/stats').catch(() => null)]),
    apply: ([{ dags }, st]) => {
      if (st) {
        const by = {};
        for (const c of st.counts) by[c.status] = (by[c.status] ?? 0) + c.n;
        fill(stats, 
          `ready ${by.ready ?? 0} · running ${(by.running ?? 0) + (by.claimed ?? 0)} · dead-lettered ${by.dead_lettered ?? 0}`,
          st.oldestReadyAgeSec != null ? ` · oldest ready ${agoText(Math.round(st.oldestReadyAgeSec)).replace(' ago', '')}` : '',
          ` · agents ${st.agents.length}`);
      }
      if (dags.length === 0) {
        fill(body, empty('No DAGs yet. Submit one with `dagent submit FILE` or POST /api/dags.'));
        return;
      }
      fill(body, table(['Name', 'Status', 'Progress', 'Spent / budget', 'Created'], dags.map((d) => h('tr', { 'data-dag-id': d.id },
        h('td', null, link(hrefDag(d.id), d.name), d.title ? h('div', { class: 'muted small' }, d.title) : null, h('div', { class: 'muted small mono' }, d.id)),
        h('td', null, badge(d.status), d.blockedReason ? h('div', { class: 'muted small' }, d.blockedReason) : null),
        h('td', null, progressBar(d.taskCounts, d.tasksTotal)),
        h('td', { class: 'num' }, usd(d.spentUsd), d.budgetUsd != null ? ` / ${usd(d.budgetUsd)}` : ''),
        h('td', null, when(d.createdAt)),
      )), { class: 'dags' }));
    },
    fail: (err) => fill(body, pageError(err)),
  });
  void load.now();
  ctx.every(OFFLINE_POLL_MS, () => { if (liveStreams === 0) load.soon(); });
  ctx.onGlobal((e) => {
    if (e.type === 'dag.progress' || e.type.startsWith('dag.') || e.type === 'task.dead_lettered' || e.type.startsWith('dlq.')) load.soon();
  });
}

// ---------------------------------------------------------------- DAG page

function legend() {
  return h('div', { class: 'legend' },
    STATUS_ORDER.map((s) => h('span', { class: 'legend-item' }, h('span', { class: `swatch status-${s}` }), statusLabel(s))),
    h('span', { class: 'legend-item' }, h('span', { class: 'swatch critical' }), 'critical path'));
}

function pageDag(ctx, dagId) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'DAG'));
  const graphBox = h('div', { class: 'graph-scroll' });
  const dlBox = h('div');
  const tasksBox = h('div');
  const msg = h('p', { class: 'error', role: 'alert' });
  fill(main, head, msg,
    h('section', { class: 'card' }, h('h2', null, 'Graph'), legend(), graphBox),
    h('section', { class: 'card' }, h('h2', null, 'Open dead letters'), dlBox),
    h('section', { class: 'card flush' }, h('h2', null, 'Tasks'), tasksBox));

  let graph;
  let svg;
  const statusCells = new Map();

  const statusEl = h('span', { id: 'dag-status', class: 'badge' });
  const progressSlot = h('div', { class: 'dag-progress' });
  const facts = h('div', { class: 'facts' });
  const cancelBtn = confirmButton('Cancel DAG', { 'data-action': 'dag-cancel' }, async () => {
    try {
      const r = await api('POST', `/api/dags/${encodeURIComponent(dagId)}/cancel`, { note: 'cancelled from the dashboard' });
      flash(`Cancelled ${r.cancelled} task(s).`);
      void load.now();
    } catch (err) {
      msg.textContent = errorText(err);
    }
  });
  const title = h('h1', null, 'DAG');
  const subtitle = h('div', { class: 'muted small' });
  fill(head, h('div', { class: 'head-row' }, title, statusEl, h('span', { class: 'spacer' }), cancelBtn), subtitle, progressSlot, facts);

  const nodeClick = (key) => {
    const n = graph?.nodes.find((x) => x.key === key);
    if (n) location.hash = hrefTask(n.id);
  };

  const showStatus = (status) => {
    statusEl.textContent = status;
    statusEl.className = `badge status-${status}`;
    statusEl.dataset.status = status;
    cancelBtn.hidden = status === 'completed' || status === 'cancelled';
  };

  const apply = (g) => {
    const { dag } = g;
    title.textContent = dag.name;
    fill(subtitle, dag.title ? `${dag.title} · ` : '', h('span', { class: 'mono' }, dag.id));
    showStatus(dag.status);
    const counts = {};
    for (const n of g.nodes) counts[n.status] = (counts[n.status] ?? 0) + 1;
    fill(progressSlot, progressBar(counts, dag.tasksTotal));
    fill(facts, 
      h('span', null, 'Spent ', usd(dag.spentUsd), dag.budgetUsd != null ? ` of ${usd(dag.budgetUsd)}` : ''),
      h('span', null, 'Open tasks ', String(dag.tasksOpen), ' of ', String(dag.tasksTotal)),
      h('span', null, 'Created ', when(dag.createdAt)),
      dag.blockedReason ? h('span', { class: 'error' }, dag.blockedReason) : null);

    if (!svg || !sameShape(graph, g)) {
      svg = renderSvg(g, { onNodeClick: nodeClick });
      fill(graphBox, g.nodes.length ? svg : empty('This DAG has no tasks.'));
    } else {
      for (const n of g.nodes) setNodeStatus(svg, n.key, n.status);
    }
    graph = g;

    fill(dlBox, g.deadLetters.length === 0 ? empty('None.') : h('ul', { class: 'dl-list' }, g.deadLetters.map((d) => h('li', null,
      link(hrefDlq(d.id), d.taskKey), ' ', h('span', { class: 'chip' }, d.errorClass), ' ', h('span', { class: 'muted' }, d.reason), ' ', when(d.createdAt)))));

    statusCells.clear();
    fill(tasksBox, table(['Task', 'Type', 'Status', 'Attempts', 'Priority', 'Claimed by', 'Cost', 'Last error'],
      [...g.nodes].sort((a, b) => a.depth - b.depth || a.key.localeCompare(b.key)).map((n) => {
        const cell = h('td', null, badge(n.status));
        statusCells.set(n.key, cell);
        return h('tr', { 'data-key': n.key },
          h('td', null, link(hrefTask(n.id), n.key), n.parentKey ? h('span', { class: 'muted small' }, ` ↳ ${n.parentKey}`) : null),
          h('td', null, n.type), cell,
          h('td', { class: 'num' }, `${n.attempts}/${n.maxAttempts}`),
          h('td', { class: 'num', title: `base ${n.priority}` }, Number(n.effectivePriority).toFixed(1)),
          h('td', null, n.claimedBy ?? ''),
          h('td', { class: 'num' }, usd(n.costUsd)),
          h('td', { class: 'small clip' }, n.lastError ?? ''));
      })));
  };

  const load = ctx.refetcher({
    load: () => api('GET', `/api/dags/${encodeURIComponent(dagId)}`),
    apply: (g) => { msg.textContent = ''; apply(g); },
    fail: (err) => { if (!graph) fill(main, pageError(err)); else msg.textContent = errorText(err); },
  });
  void load.now();
  ctx.every(OFFLINE_POLL_MS, () => { if (liveStreams === 0) load.soon(); });

  /** A status change seen on the stream: recolour now, refetch shortly (header, counts, dead letters). */
  const recolour = (key, status) => {
    const n = graph?.nodes.find((x) => x.key === key);
    if (!n || !svg) return false;
    n.status = status;
    setNodeStatus(svg, key, status);
    statusCells.get(key)?.replaceChildren(badge(status));
    return true;
  };

  ctx.stream(`?dag_id=${encodeURIComponent(dagId)}`, (e) => {
    if (e.type === 'snapshot') {
      let unknown = false;
      for (const t of e.data.tasks ?? []) if (!recolour(t.key, t.status)) unknown = true;
      if (unknown) void load.now(); else load.soon();
      return;
    }
    if (e.type === 'task.status') {
      const known = recolour(e.data.key, e.data.status);
      // A task that was not there before (a spawned subtask) needs the graph redrawn.
      if (!known || e.data.previous === null) void load.now(); else load.soon();
      return;
    }
    if (e.type === 'close') return;
    load.soon();
  });
}

// ---------------------------------------------------------------- task page

function verdictRows(attempts) {
  const rows = [];
  for (const a of attempts) {
    for (const v of a.details?.verdicts ?? []) {
      rows.push(h('tr', null,
        h('td', { class: 'num' }, String(a.attempt)),
        h('td', { class: 'num' }, String((v.step ?? 0) + 1)),
        h('td', null, v.kind ?? ''),
        h('td', null, h('span', { class: `verdict ${v.pass ? 'pass' : 'fail'}` }, v.pass ? 'pass' : 'fail')),
        h('td', { class: 'num' }, v.score != null ? Number(v.score).toFixed(2) : ''),
        h('td', null, (v.reasons ?? []).length ? h('ul', { class: 'reasons' }, v.reasons.map((r) => h('li', null, r))) : '')));
    }
  }
  return rows;
}

function pageTask(ctx, taskId) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Task'));
  const actionMsg = h('p', { class: 'action-msg', role: 'status' });
  const content = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const prio = h('input', { type: 'number', min: 0, max: 100, step: 1, id: 'priority-input', 'aria-label': 'priority (0 is most urgent)' });
  const cancelNote = h('input', { type: 'text', placeholder: 'note (optional)', 'aria-label': 'cancel note', maxlength: 2000 });
  let task;

  const setPriority = h('button', { type: 'button', 'data-action': 'task-priority' }, 'Set priority');
  setPriority.addEventListener('click', async () => {
    const p = Number(prio.value);
    if (!Number.isInteger(p) || p < 0 || p > 100) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = 'Priority must be a whole number from 0 (most urgent) to 100.';
      return;
    }
    try {
      const r = await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/priority`, { priority: p });
      actionMsg.className = 'action-msg ok';
      actionMsg.textContent = `Priority set to ${p} (${r.tasks ?? 1} task).`;
      void load.now();
    } catch (err) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = errorText(err);
    }
  });
  const cancelBtn = confirmButton('Cancel task', { 'data-action': 'task-cancel' }, async () => {
    try {
      const r = await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/cancel`, cancelNote.value.trim() ? { note: cancelNote.value.trim() } : {});
      actionMsg.className = 'action-msg ok';
      actionMsg.textContent = `Cancelled ${r.cancelled.length} task(s): ${r.cancelled.map((c) => c.key).join(', ')}`;
      void load.now();
    } catch (err) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = errorText(err);
    }
  });
  const actions = h('div', { class: 'card actions-bar' },
    h('label', null, 'Priority ', prio), setPriority,
    h('span', { class: 'spacer' }),
    cancelNote, cancelBtn);
  fill(main, head, actions, actionMsg, content);

  let streaming = false;
  const apply = ({ task: t, inputs, attempts, events }) => {
    const first = !task;
    task = t;
    if (first) prio.value = String(t.priority);
    const finished = ['completed', 'cancelled'].includes(t.status);
    cancelBtn.hidden = finished;
    cancelNote.hidden = finished;
    fill(head, 
      h('div', { class: 'crumbs small' }, link(hrefDag(t.dagId), t.dagId), ' / task'),
      h('div', { class: 'head-row' }, h('h1', null, t.key), badge(t.status, { id: 'task-status' }), h('span', { class: 'chip' }, t.type)),
      t.title ? h('p', { class: 'muted' }, t.title) : null,
      h('div', { class: 'facts' },
        h('span', null, 'Attempts ', `${t.attempts}/${t.maxAttempts}`),
        h('span', null, 'Priority ', String(t.priority), ` (effective ${Number(t.effectivePriority).toFixed(1)})`),
        t.claimedBy ? h('span', null, 'Claimed by ', t.claimedBy) : null,
        h('span', null, 'Cost ', usd(t.costUsd)),
        h('span', null, 'Created ', when(t.createdAt)),
        t.completedAt ? h('span', null, 'Completed ', when(t.completedAt)) : null,
        h('span', { class: 'muted mono' }, t.id)),
      t.lastError ? h('p', { class: 'error' }, 'Last error: ', t.lastError) : null);

    const spec = t.spec ?? {};
    const verdicts = verdictRows(attempts);
    fill(content, 
      section('Spec',
        h('dl', { class: 'spec' },
          h('dt', null, 'Prompt'), h('dd', null, spec.prompt ? h('pre', { class: 'prompt' }, spec.prompt) : h('span', { class: 'muted' }, 'none')),
          h('dt', null, 'Input'), h('dd', null, spec.input && Object.keys(spec.input).length ? pre(spec.input) : h('span', { class: 'muted' }, 'none')),
          h('dt', null, 'Models'), h('dd', null, chips(spec.models)),
          spec.fallbackModels?.length ? [h('dt', null, 'Fallback models'), h('dd', null, chips(spec.fallbackModels))] : null,
          h('dt', null, 'Required capabilities'), h('dd', null, chips(t.requiredCapabilities)),
          spec.context?.length ? [h('dt', null, 'Context'), h('dd', null, chips(spec.context.map((c) => (typeof c === 'string' ? c : JSON.stringify(c)))))] : null,
          t.outputSpec ? [h('dt', null, 'Output spec'), h('dd', null, pre(t.outputSpec))] : null)),
      section('Resolved inputs', inputs && Object.keys(inputs).length ? pre(inputs, { id: 'task-inputs' }) : empty('No upstream context.')),
      section('Output', t.output !== null && t.output !== undefined ? pre(t.output, { id: 'task-output' }) : empty('No output yet.')),
      section('Validation verdicts', verdicts.length
        ? table(['Attempt', 'Step', 'Kind', 'Verdict', 'Score', 'Reasons'], verdicts, { class: 'verdicts' })
        : empty('No validation verdicts.')),
      section('Attempts', attempts.length ? table(['#', 'Fence', 'Agent', 'Outcome', 'Error class', 'Error', 'Started', 'Duration', 'Cost'],
        attempts.map((a) => h('tr', { 'data-attempt': a.attempt },
          h('td', { class: 'num' }, String(a.attempt)), h('td', { class: 'num' }, String(a.fence)), h('td', null, a.agentId ?? ''),
          h('td', null, h('span', { class: `outcome ${a.outcome}` }, a.outcome)), h('td', null, a.errorClass ?? ''),
          h('td', { class: 'small clip' }, a.errorMessage ?? ''), h('td', null, when(a.startedAt)),
          h('td', { class: 'num' }, duration(a.durationMs)), h('td', { class: 'num' }, usd(a.costUsd)))),
        { id: 'attempts' }) : empty('No attempts yet.')),
      section('Events', events.length ? h('ol', { class: 'events' }, events.map((e) => h('li', null,
        when(e.at), ' ', h('strong', null, e.type), e.agentId ? h('span', { class: 'muted' }, ` by ${e.agentId}`) : null,
        e.data && Object.keys(e.data).length ? h('code', { class: 'small' }, ` ${JSON.stringify(e.data)}`) : null))) : empty('No events.')));

    if (!streaming) {
      streaming = true;
      ctx.stream(`?dag_id=${encodeURIComponent(t.dagId)}`, (e) => {
        if (e.type === 'snapshot' || e.type === 'close') return;
        if (e.data?.taskId === taskId) load.soon();
      });
    }
  };

  const load = ctx.refetcher({
    load: () => api('GET', `/api/tasks/${encodeURIComponent(taskId)}`),
    apply,
    fail: (err) => { if (!task) { actions.hidden = true; fill(content, pageError(err)); } },
  });
  void load.now();
}

// ---------------------------------------------------------------- DLQ page

function historyTable(history) {
  if (!history?.length) return empty('No attempts recorded.');
  return table(['#', 'Agent', 'Outcome', 'Error class', 'Error', 'Duration', 'Cost'], history.map((a) => h('tr', null,
    h('td', { class: 'num' }, String(a.attempt)), h('td', null, a.agent ?? ''),
    h('td', null, h('span', { class: `outcome ${a.outcome}` }, a.outcome ?? '')), h('td', null, a.error_class ?? ''),
    h('td', { class: 'small clip' }, a.error ?? ''), h('td', { class: 'num' }, duration(a.duration_ms)), h('td', { class: 'num' }, usd(a.cost_usd)))),
  { class: 'history' });
}

function pageDlq(ctx, selectedId) {
  const list = h('div', { class: 'dlq-list' }, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, 
    h('div', { class: 'page-head' }, h('h1', null, 'Dead letters'),
      h('p', { class: 'muted' }, 'Tasks that used up their attempts or failed in a way retrying cannot fix. Retry them (optionally with a fresh attempt budget), edit their spec and retry, or cancel them and what depends on them.')),
    list);

  /** Entries stay the same elements across refetches, so typed notes and open forms survive live updates. */
  const cards = new Map();
  let selected = selectedId;

  const DONE = { Retry: 'Retried', Cancel: 'Cancelled', 'Edit & retry': 'Edited and retried' };
  const act = async (entry, card, what, call) => {
    const out = card.querySelector('.action-msg');
    out.className = 'action-msg';
    out.textContent = `${what}…`;
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    try {
      await call();
      flash(`${DONE[what]} task ${entry.taskKey}.`);
      out.className = 'action-msg ok';
      out.textContent = `${DONE[what]}.`;
      card.classList.add('resolved');
      dlqCountRefreshSoon();
      void load.now();
    } catch (err) {
      out.className = 'action-msg error';
      out.textContent = `${what} failed: ${errorText(err)}`;
      for (const b of card.querySelectorAll('button')) b.disabled = false;
    }
  };

  const buildCard = (entry) => {
    const path = `/api/dlq/${encodeURIComponent(entry.id)}`;
    const note = h('input', { type: 'text', class: 'note', placeholder: 'note (required to cancel)', maxlength: 2000, 'aria-label': 'note', 'data-id': entry.id });
    const reset = h('input', { type: 'checkbox', class: 'reset', 'data-id': entry.id });
    const out = h('p', { class: 'action-msg', role: 'status' });
    const details = h('div', { class: 'dlq-details' });
    const editBox = h('div', { class: 'edit-box', hidden: true });
    const card = h('article', { class: 'card dlq-entry', 'data-id': entry.id });

    const noteBody = () => {
      const b = {};
      if (note.value.trim()) b.note = note.value.trim();
      return b;
    };
    const retry = h('button', { type: 'button', class: 'primary', 'data-action': 'retry', 'data-id': entry.id }, 'Retry');
    retry.addEventListener('click', () => act(entry, card, 'Retry', () => api('POST', `${path}/retry`, { ...noteBody(), reset_attempts: reset.checked })));
    const edit = h('button', { type: 'button', 'data-action': 'edit', 'data-id': entry.id }, 'Edit & retry…');
    edit.addEventListener('click', () => {
      editBox.hidden = !editBox.hidden;
      if (!editBox.hidden) { select(true); void editFormFill(); }
    });
    const cancel = h('button', { type: 'button', class: 'danger', 'data-action': 'cancel', 'data-id': entry.id }, 'Cancel task');
    cancel.addEventListener('click', () => {
      if (!note.value.trim()) {
        out.className = 'action-msg error';
        out.textContent = 'A note is required to cancel: say why this task is given up.';
        note.focus();
        return;
      }
      void act(entry, card, 'Cancel', () => api('POST', `${path}/cancel`, noteBody()));
    });

    // The edit form, filled from the task's current spec the first time it opens.
    let filled = false;
    const prompt = h('textarea', { rows: 5, class: 'edit-prompt', 'data-id': entry.id });
    const input = h('textarea', { rows: 6, class: 'edit-input mono', 'data-id': entry.id, spellcheck: 'false' });
    const inputErr = h('p', { class: 'field-error', role: 'alert' });
    const priority = h('input', { type: 'number', min: 0, max: 100, step: 1, class: 'edit-priority' });
    const maxAttempts = h('input', { type: 'number', min: 1, max: 100, step: 1, class: 'edit-max-attempts' });
    const submit = h('button', { type: 'button', class: 'primary', 'data-action': 'edit-retry', 'data-id': entry.id }, 'Save & retry');
    let original = {};
    const parseInput = () => {
      const text = input.value.trim();
      if (!text) return { value: undefined };
      try {
        const v = JSON.parse(text);
        if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: 'Input must be a JSON object, like {"key": "value"}.' };
        return { value: v };
      } catch (err) {
        return { error: `Input is not valid JSON: ${err.message}` };
      }
    };
    const checkInput = () => {
      const r = parseInput();
      inputErr.textContent = r.error ?? '';
      input.classList.toggle('invalid', !!r.error);
      submit.disabled = !!r.error;
      return r;
    };
    input.addEventListener('input', checkInput);
    async function editFormFill() {
      if (filled) return;
      filled = true;
      try {
        const { task } = await api('GET', path);
        original = {
          prompt: task.spec?.prompt ?? '', input: JSON.stringify(task.spec?.input ?? {}, null, 2),
          priority: String(task.priority), maxAttempts: String(task.maxAttempts),
        };
        prompt.value = original.prompt;
        input.value = original.input;
        priority.value = original.priority;
        maxAttempts.value = original.maxAttempts;
        checkInput();
      } catch (err) {
        filled = false;
        inputErr.textContent = `Could not load the task: ${errorText(err)}`;
      }
    }
    submit.addEventListener('click', () => {
      const parsed = checkInput();
      if (parsed.error) return;
      const e = {};
      if (prompt.value !== original.prompt) e.prompt = prompt.value;
      if (input.value !== original.input) e.input = parsed.value ?? {};
      if (priority.value !== original.priority && priority.value !== '') e.priority = Number(priority.value);
      if (maxAttempts.value !== original.maxAttempts && maxAttempts.value !== '') e.max_attempts = Number(maxAttempts.value);
      if (Object.keys(e).length === 0) {
        out.className = 'action-msg error';
        out.textContent = 'Change at least one field to edit and retry (or use Retry).';
        return;
      }
      void act(entry, card, 'Edit & retry', () => api('POST', `${path}/edit-retry`, { edit: e, ...noteBody(), reset_attempts: reset.checked }));
    });
    add(editBox, h('h3', null, 'Edit the task, then retry it'),
      h('label', { class: 'block' }, 'Prompt', prompt),
      h('label', { class: 'block' }, 'Input (JSON object)', input), inputErr,
      h('div', { class: 'row' }, h('label', null, 'Priority ', priority), h('label', null, 'Max attempts ', maxAttempts)),
      h('div', { class: 'actions' }, submit));

    const toggle = h('button', { type: 'button', class: 'link', 'aria-expanded': 'false' }, 'Show failure history');
    const select = (open) => {
      card.classList.toggle('selected', open);
      details.hidden = !open;
      toggle.setAttribute('aria-expanded', String(open));
      toggle.textContent = open ? 'Hide failure history' : 'Show failure history';
      if (open) selected = entry.id;
    };
    toggle.addEventListener('click', () => select(details.hidden));

    add(card, 
      h('header', { class: 'head-row' },
        h('h2', null, link(hrefTask(entry.taskId), entry.taskKey)), h('span', { class: 'chip' }, entry.taskType),
        h('span', { class: 'chip error-class' }, entry.errorClass), entry.poisonPill ? h('span', { class: 'chip poison' }, 'poison pill') : null,
        h('span', { class: 'spacer' }), h('span', { class: 'muted small' }, 'DAG ', link(hrefDag(entry.dagId), entry.dagId))),
      h('p', { class: 'reason' }, entry.reason),
      h('div', { class: 'facts small' },
        h('span', null, 'Attempts ', String(entry.attempts)), h('span', null, 'Cost ', usd(entry.totalCostUsd)),
        h('span', null, 'Dead-lettered ', when(entry.createdAt)), h('span', { class: 'mono muted' }, entry.id)),
      h('div', { class: 'actions-bar' }, note, h('label', { class: 'check' }, reset, ' reset attempts'), retry, edit, cancel),
      out, editBox, toggle, details);

    const verdicts = verdictRows((entry.history ?? []).map((a) => ({ attempt: a.attempt, details: a.details })));
    add(details, h('h3', null, 'Failure history'), historyTable(entry.history),
      verdicts.length ? [h('h3', null, 'Validation verdicts'), table(['Attempt', 'Step', 'Kind', 'Verdict', 'Score', 'Reasons'], verdicts, { class: 'verdicts' })] : null);
    select(entry.id === selected);
    return card;
  };

  let first = true;
  const load = ctx.refetcher({
    load: () => api('GET', '/api/dlq?limit=500'),
    apply: ({ entries }) => {
      const ids = new Set(entries.map((e) => e.id));
      for (const [id, card] of cards) if (!ids.has(id)) { card.remove(); cards.delete(id); }
      const ordered = entries.map((e) => {
        if (!cards.has(e.id)) cards.set(e.id, buildCard(e));
        return cards.get(e.id);
      });
      if (ordered.length === 0) fill(list, empty('No open dead letters. Everything is flowing.'));
      else fill(list, ...ordered);
      if (first && selectedId && cards.has(selectedId)) cards.get(selectedId).scrollIntoView({ block: 'start' });
      else if (first && selectedId) flash(`Dead letter ${selectedId} is not open any more.`, 'warn');
      first = false;
    },
    fail: (err) => fill(list, pageError(err)),
  });
  void load.now();
  ctx.onGlobal((e) => { if (DLQ_EVENTS.has(e.type)) load.soon(); });
}

// ---------------------------------------------------------------- agents

function pageAgents(ctx) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Agents')), h('div', { class: 'card flush' }, body));
  const heartbeats = [];

  const tick = () => {
    for (const { el, at } of heartbeats) {
      const sec = agoSec(at);
      el.textContent = agoText(sec);
      el.classList.toggle('stale', sec > STALE_HEARTBEAT_SEC);
    }
  };

  const load = ctx.refetcher({
    load: () => api('GET', '/api/agents'),
    apply: ({ agents }) => {
      heartbeats.length = 0;
      if (agents.length === 0) {
        fill(body, empty('No agents registered.'));
        return;
      }
      fill(body, table(['Agent', 'Type', 'Status', 'Capabilities', 'Models', 'Concurrency', 'Budget', 'Spent', 'Reserved', 'Heartbeat'],
        agents.map((a) => {
          const hb = h('span', { class: 'heartbeat', title: new Date(a.heartbeatAt).toISOString() });
          heartbeats.push({ el: hb, at: a.heartbeatAt });
          return h('tr', { 'data-agent-id': a.id },
            h('td', { class: 'mono' }, a.id), h('td', null, a.type), h('td', null, badge(a.status)),
            h('td', null, chips(a.capabilities)), h('td', null, chips(a.models)),
            h('td', { class: 'num' }, String(a.maxConcurrent)),
            h('td', { class: 'num' }, a.budgetUsd != null ? usd(a.budgetUsd) : 'unlimited'),
            h('td', { class: 'num' }, usd(a.spentUsd)), h('td', { class: 'num' }, usd(a.reservedUsd)),
            h('td', null, hb));
        }), { class: 'agents' }));
      tick();
    },
    fail: (err) => fill(body, pageError(err)),
  });
  void load.now();
  ctx.every(1000, tick);
  ctx.every(AGENTS_REFRESH_MS, () => void load.now());
  ctx.onGlobal((e) => { if (e.type.startsWith('agent.')) load.soon(); });
}

// ---------------------------------------------------------------- start

document.getElementById('signout').addEventListener('click', () => signOut('Signed out.'));
window.addEventListener('hashchange', route);
route();
