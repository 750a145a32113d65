// Element-building and formatting helpers. Children that are not Nodes become
// text nodes: task outputs and errors are untrusted, so no HTML is ever parsed.
import { statusLabel } from './graph.js';
import { errorText } from './api.js';

export const main = document.getElementById('main');

// ---------------------------------------------------------------- DOM helpers

/** Build an element. Children that are not Nodes become text nodes (never HTML). */
export function h(tag, attrs, ...children) {
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
export function add(parent, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    parent.append(c instanceof Node ? c : String(c));
  }
  return parent;
}

/** Replace an element's children, with add's rules. */
export function fill(parent, ...children) {
  parent.replaceChildren();
  return add(parent, ...children);
}

export const link = (href, ...children) => h('a', { href }, ...children);
export const hrefDag = (id) => `#/dags/${encodeURIComponent(id)}`;
export const hrefTask = (id) => `#/tasks/${encodeURIComponent(id)}`;
export const hrefDlq = (id) => (id ? `#/dlq/${encodeURIComponent(id)}` : '#/dlq');

export function badge(status, attrs = {}) {
  return h('span', { class: `badge status-${status}`, 'data-status': status, ...attrs }, statusLabel(status));
}

export function pre(value, attrs = {}) {
  return h('pre', { class: 'json', ...attrs }, value === undefined ? 'undefined' : typeof value === 'string' ? value : JSON.stringify(value, null, 2));
}

export function chips(list) {
  if (!list || list.length === 0) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'chips' }, list.map((c) => h('span', { class: 'chip' }, c)));
}

export function table(headers, rows, attrs = {}) {
  return h('table', attrs,
    h('thead', null, h('tr', null, headers.map((x) => h('th', null, x)))),
    h('tbody', null, rows));
}

export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', null, title), ...children);
}

export function empty(text) {
  return h('p', { class: 'muted empty' }, text);
}

export function usd(n) {
  if (n === null || n === undefined) return '—';
  const v = Number(n);
  return `$${v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(4) : v.toFixed(2)}`;
}

export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, d.toLocaleString());
}

export function agoSec(iso) {
  return Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
}

export function agoText(sec) {
  if (sec < 120) return `${sec}s ago`;
  if (sec < 7200) return `${Math.round(sec / 60)}m ago`;
  if (sec < 172800) return `${Math.round(sec / 3600)}h ago`;
  return `${Math.round(sec / 86400)}d ago`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/** A bar of completed (and running, failed, cancelled) tasks out of the total. */
export function progressBar(counts, total) {
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
export function flash(message, kind = 'ok') {
  const el = document.getElementById('flash');
  el.textContent = message;
  el.className = `flash ${kind}`;
  el.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

/** A button that asks again before doing something destructive. */
export function confirmButton(label, attrs, action) {
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

export function pageError(err) {
  return h('div', { class: 'card error-box', role: 'alert' }, h('strong', null, 'Could not load this page. '), errorText(err));
}

// ---------------------------------------------------------------- verdicts (task and DLQ pages)

export function verdictRows(attempts) {
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
