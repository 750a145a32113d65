// @ts-check
// Element-building and formatting helpers. Children that are not Nodes become
// text nodes: task outputs and errors are untrusted, so no HTML is ever parsed.
import { statusLabel } from './graph.js';
import { errorText } from './api.js';

/** @typedef {import('../src/wire/tasks.js').AttemptView['details']} AttemptDetails */

export const main = /** @type {HTMLElement} */ (document.getElementById('main'));

// ---------------------------------------------------------------- DOM helpers

/**
 * What may go into an element: nodes, and anything else as text; lists of these (nested too) are flattened, and
 * null, undefined and false are left out.
 * @typedef {Node | string | number | boolean | null | undefined | unknown[]} Child
 */
/**
 * An element's attributes: `class`, `dataset` (an object), `on<event>` (a listener), `value`, and any other as an
 * attribute (true: present, empty; null, undefined or false: absent).
 * @typedef {Record<string, unknown>} Attrs
 */

/**
 * Build an element. Children that are not Nodes become text nodes (never HTML).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = /** @type {string} */ (v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
    else if (k === 'value') /** @type {HTMLInputElement} */ (/** @type {unknown} */ (e)).value = /** @type {string} */ (v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  add(e, ...children);
  return e;
}

/**
 * Append children (nested arrays flattened; null, undefined and false skipped; strings as text).
 * @template {Element} E
 * @param {E} parent
 * @param {...Child} children
 * @returns {E}
 */
export function add(parent, ...children) {
  for (const c of /** @type {Array<Exclude<Child, unknown[]>>} */ (children.flat(Infinity))) {
    if (c === undefined || c === null || c === false) continue;
    parent.append(c instanceof Node ? c : String(c));
  }
  return parent;
}

/**
 * Replace an element's children, with add's rules.
 * @template {Element} E
 * @param {E} parent
 * @param {...Child} children
 * @returns {E}
 */
export function fill(parent, ...children) {
  parent.replaceChildren();
  return add(parent, ...children);
}

/**
 * @param {string} href
 * @param {...Child} children
 */
export const link = (href, ...children) => h('a', { href }, ...children);
/** @param {string} id */
export const hrefDag = (id) => `#/dags/${encodeURIComponent(id)}`;
/** @param {string} id */
export const hrefTask = (id) => `#/tasks/${encodeURIComponent(id)}`;
/** Two runs side by side (page-compare.js). @param {string} a @param {string} b */
export const hrefCompare = (a, b) => `#/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
/** @param {string} [id] */
export const hrefDlq = (id) => (id ? `#/dlq/${encodeURIComponent(id)}` : '#/dlq');

/**
 * @param {string} status
 * @param {Attrs} [attrs]
 */
export function badge(status, attrs = {}) {
  return h('span', { class: `badge status-${status}`, 'data-status': status, ...attrs }, statusLabel(status));
}

/**
 * @param {unknown} value
 * @param {Attrs} [attrs]
 */
export function pre(value, attrs = {}) {
  return h('pre', { class: 'json', ...attrs }, value === undefined ? 'undefined' : typeof value === 'string' ? value : JSON.stringify(value, null, 2));
}

/** @param {string[] | null | undefined} list */
export function chips(list) {
  if (!list || list.length === 0) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'chips' }, list.map((c) => h('span', { class: 'chip' }, c)));
}

/**
 * @param {string[]} headers
 * @param {Child} rows
 * @param {Attrs} [attrs]
 */
export function table(headers, rows, attrs = {}) {
  return h('table', attrs,
    h('thead', null, h('tr', null, headers.map((x) => h('th', null, x)))),
    h('tbody', null, rows));
}

/**
 * @param {string} title
 * @param {...Child} children
 */
export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', null, title), ...children);
}

/** @param {string} text */
export function empty(text) {
  return h('p', { class: 'muted empty' }, text);
}

/** @param {number | string | null | undefined} n */
export function usd(n) {
  if (n === null || n === undefined) return '—';
  const v = Number(n);
  return `$${v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(4) : v.toFixed(2)}`;
}

/** @param {string | null | undefined} iso */
export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, d.toLocaleString());
}

/** @param {string} iso */
export function agoSec(iso) {
  return Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
}

/** @param {number} sec */
export function agoText(sec) {
  if (sec < 120) return `${sec}s ago`;
  if (sec < 7200) return `${Math.round(sec / 60)}m ago`;
  if (sec < 172800) return `${Math.round(sec / 3600)}h ago`;
  return `${Math.round(sec / 86400)}d ago`;
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

/**
 * A bar of completed (and running, failed, cancelled) tasks out of the total.
 * @param {Record<string, number> | null | undefined} counts
 * @param {number} total
 */
export function progressBar(counts, total) {
  /** @type {Record<string, number>} */
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
  for (const [status, n] of /** @type {Array<[string, number]>} */ (parts)) {
    if (!n || !all) continue;
    const seg = h('div', { class: `seg status-${status}` });
    seg.style.width = `${(100 * n) / all}%`;
    bar.append(seg);
  }
  return h('div', { class: 'progress-wrap' }, bar, h('span', { class: 'progress-text' }, `${done}/${all}`));
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let flashTimer;
/**
 * @param {string} message
 * @param {'ok' | 'warn' | 'error'} [kind]
 */
export function flash(message, kind = 'ok') {
  const el = /** @type {HTMLElement} */ (document.getElementById('flash'));
  el.textContent = message;
  el.className = `flash ${kind}`;
  el.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

/**
 * A button that asks again before doing something destructive.
 * @param {string} label
 * @param {Attrs} attrs
 * @param {() => Promise<unknown> | unknown} action
 */
export function confirmButton(label, attrs, action) {
  const btn = h('button', { type: 'button', class: 'danger', ...attrs }, label);
  let armed = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
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

/** @param {unknown} err */
export function pageError(err) {
  return h('div', { class: 'card error-box', role: 'alert' }, h('strong', null, 'Could not load this page. '), errorText(err));
}

// ---------------------------------------------------------------- verdicts (task and DLQ pages)

/**
 * A row per validation verdict of each attempt.
 * @param {Array<{ attempt: number, details: AttemptDetails }>} attempts
 */
export function verdictRows(attempts) {
  /** @type {HTMLTableRowElement[]} */
  const rows = [];
  for (const a of attempts) {
    for (const v of a.details?.verdicts ?? []) {
      rows.push(h('tr', null,
        h('td', { class: 'num' }, String(a.attempt)),
        h('td', { class: 'num' }, String((v.step ?? 0) + 1)),
        h('td', null, v.kind ?? ''),
        h('td', null, h('span', { class: `verdict ${v.pass ? 'pass' : 'fail'}` }, v.pass ? 'pass' : 'fail')),
        h('td', { class: 'num' }, v.score != null ? Number(v.score).toFixed(2) : ''),
        h('td', null, (v.reasons ?? []).length ? h('ul', { class: 'reasons' }, (v.reasons ?? []).map((r) => h('li', null, r))) : '')));
    }
  }
  return rows;
}
