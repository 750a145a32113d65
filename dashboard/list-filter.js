// @ts-check
// Search, filters and keyset paging for the long lists (DAGs, dead letters): a form whose values become the
// list's query, and Newer / Older buttons that walk the API's cursors (`next`), keeping the ones already seen.
import { h } from './dom.js';

/**
 * A field of the filter form.
 * @typedef {{ name: string, label: string, type: 'search' | 'text' | 'date' | 'select', options?: string[] }} FilterField
 */
/** A list's query parameters, by name. @typedef {Record<string, string>} FilterParams */

/**
 * The filter form. `fields`: [{name, label, type: 'search' | 'text' | 'date' | 'select', options?}]. Dates are
 * days (UTC): `from` starts at its midnight, `to` includes its whole day. Submitting (Enter, or the button)
 * calls `onApply` with the query's parameters.
 * @param {FilterField[]} fields
 * @param {(params: FilterParams) => void} onApply
 */
export function filterForm(fields, onApply) {
  /** @type {Map<string, HTMLInputElement | HTMLSelectElement>} */
  const inputs = new Map();
  const form = h('form', { class: 'filters', role: 'search' });
  for (const f of fields) {
    const input = f.type === 'select'
      ? h('select', { name: f.name, 'aria-label': f.label }, h('option', { value: '' }, `any ${f.label.toLowerCase()}`), (f.options ?? []).map((o) => h('option', { value: o }, o.replace(/_/g, ' '))))
      : h('input', { name: f.name, type: f.type, placeholder: f.label, 'aria-label': f.label, maxlength: f.type === 'date' ? undefined : 200 });
    inputs.set(f.name, input);
    form.append(f.type === 'date' ? h('label', { class: 'small muted' }, `${f.label} `, input) : input);
  }
  const clear = h('button', { type: 'button', 'data-action': 'filters-clear' }, 'Clear');
  form.append(h('button', { type: 'submit', class: 'primary', 'data-action': 'filters-apply' }, 'Search'), clear);
  const params = () => {
    /** @type {FilterParams} */
    const p = {};
    for (const [name, input] of inputs) {
      const v = input.value.trim();
      if (!v) continue;
      if (input.type === 'date') p[name] = name === 'to' ? new Date(Date.parse(`${v}T00:00:00Z`) + 86_400_000).toISOString() : `${v}T00:00:00Z`;
      else p[name] = v;
    }
    return p;
  };
  form.addEventListener('submit', (ev) => { ev.preventDefault(); onApply(params()); });
  clear.addEventListener('click', () => { for (const input of inputs.values()) input.value = ''; onApply(params()); });
  return { el: form, params };
}

/**
 * `?a=1&b=2` from an object, skipping empty values.
 * @param {Record<string, unknown>} params
 */
export function queryString(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * Where a paged list is: its filter, the cursors of the pages before this one, this page's cursor and the next.
 * `render(query)` is called with the query to load; `loaded(next)` tells it what the API answered.
 * @param {number} pageSize
 * @param {(query: string) => void} render
 */
export function pagedList(pageSize, render) {
  /** @type {FilterParams} */
  let filter = {};
  /** @type {Array<string | undefined>} */
  let before = [];
  /** @type {string | undefined} */
  let cursor;
  /** @type {string | null} */
  let next = null;
  const status = h('span', { class: 'muted small page-no' });
  const newer = h('button', { type: 'button', 'data-action': 'page-newer', disabled: true }, '← Newer');
  const older = h('button', { type: 'button', 'data-action': 'page-older', disabled: true }, 'Older →');
  const query = () => queryString({ ...filter, limit: pageSize, cursor });
  const go = () => render(query());
  newer.addEventListener('click', () => { cursor = before.pop(); go(); });
  // Until the page it asks for answers, a second click would walk past it.
  older.addEventListener('click', () => {
    if (!next) return;
    before.push(cursor);
    cursor = next;
    next = null;
    older.disabled = true;
    go();
  });
  return {
    el: h('div', { class: 'pager' }, newer, status, older),
    query,
    /** @param {FilterParams} f */
    filter: (f) => { filter = f; before = []; cursor = undefined; go(); },
    /**
     * @param {string | null} n the API's `next`
     * @param {number} shown
     */
    loaded: (n, shown) => {
      next = n;
      newer.disabled = before.length === 0;
      older.disabled = !n;
      status.textContent = `page ${before.length + 1} · ${shown} shown`;
    },
    current: () => ({ ...filter }),
  };
}
