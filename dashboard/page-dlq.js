// @ts-check
// The dead-letter queue: retry, edit & retry, or cancel each open entry; search, filter and page through them on
// the server, and retry or cancel every entry a filter matches at once. The parts: dlq/list.js (filters, cards
// kept across refetches), dlq/card.js (one entry), dlq/edit.js (its edit form), dlq/bulk.js (all matching).
import { api } from './api.js';
import { h, fill, main, flash, pageError } from './dom.js';
import { DLQ_EVENTS } from './live.js';
import { pagedList } from './list-filter.js';
import { DLQ_PAGE, dlqFilters, dlqListShow } from './dlq/list.js';
import { dlqCard } from './dlq/card.js';
import { dlqBulkBar } from './dlq/bulk.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/dlq.js').DlqPageAnswer} DlqPageAnswer */
/** @typedef {import('../src/wire/dlq.js').DlqShowAnswer} DlqShowAnswer */

export { DLQ_PAGE };

/**
 * @param {PageContext} ctx
 * @param {string} [selectedId] the entry to show open (`#/dlq/<id>`)
 */
export function pageDlq(ctx, selectedId) {
  const list = h('div', { class: 'dlq-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const pager = pagedList(DLQ_PAGE, () => void load.now());
  const filters = dlqFilters((p) => pager.filter(p));
  const bulkBar = dlqBulkBar(pager, () => void load.now());
  fill(main,
    h('div', { class: 'page-head' }, h('h1', null, 'Dead letters'),
      h('p', { class: 'muted' }, 'Tasks that used up their attempts or failed in a way retrying cannot fix. Retry them (optionally with a fresh attempt budget), edit their spec and retry, or cancel them and what depends on them.')),
    filters.el, bulkBar, list, pager.el);

  /** Entries stay the same elements across refetches, so typed notes and open forms survive live updates. */
  /** @type {Map<string, HTMLElement>} */
  const cards = new Map();
  let selected = selectedId;
  /** @type {import('./dlq/card.js').CardHooks} */
  const hooks = { selected: () => selected, onSelect: (id) => { selected = id; }, reload: () => void load.now() };

  let first = true;
  const load = ctx.refetcher({
    load: () => /** @type {Promise<DlqPageAnswer>} */ (api('GET', `/api/dlq${pager.query()}`)),
    apply: ({ entries, next }) => {
      pager.loaded(next, entries.length);
      dlqListShow(list, cards, entries, (e) => dlqCard(e, hooks), Object.keys(pager.current()).length > 0);
      if (first && selectedId && cards.has(selectedId)) /** @type {HTMLElement} */ (cards.get(selectedId)).scrollIntoView({ block: 'start' });
      else if (first && selectedId) {
        // Not on the first page: show it by its id, unless it was resolved meanwhile.
        /** @type {Promise<DlqShowAnswer>} */ (api('GET', `/api/dlq/${encodeURIComponent(selectedId)}`))
          .then(({ entry }) => (entry.resolution ? flash(`Dead letter ${selectedId} is not open any more.`, 'warn') : pager.filter({ q: selectedId })))
          .catch(() => flash(`Dead letter ${selectedId} is not open any more.`, 'warn'));
      }
      first = false;
    },
    fail: (err) => fill(list, pageError(err)),
  });
  void load.now();
  ctx.onGlobal((e) => { if (DLQ_EVENTS.has(e.type)) load.soon(); });
}
