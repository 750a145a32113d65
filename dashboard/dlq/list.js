// @ts-check
// The dead-letter list: its filters, and its cards, which stay the same elements across refetches so that typed
// notes and open forms survive live updates.
import { fill, empty } from '../dom.js';
import { filterForm } from '../list-filter.js';

/** @typedef {import('../../src/wire/dlq.js').DeadLetterListed} DeadLetterListed */
/** @typedef {import('../list-filter.js').FilterParams} FilterParams */

/** Entries per page. */
export const DLQ_PAGE = 50;

/**
 * The list's filter form: what `GET /api/dlq` and `POST /api/dlq/bulk` select entries by.
 * @param {(params: FilterParams) => void} onApply
 */
export function dlqFilters(onApply) {
  return filterForm([
    { name: 'q', label: 'Task key, reason or id', type: 'search' },
    { name: 'error_class', label: 'Error class', type: 'text' },
    { name: 'type', label: 'Task type', type: 'text' },
    { name: 'dag_id', label: 'DAG id', type: 'text' },
    { name: 'from', label: 'From', type: 'date' },
    { name: 'to', label: 'To', type: 'date' },
  ], onApply);
}

/**
 * Show a page of entries in `list`: the cards of entries no longer listed go, a card is built for each new one, and
 * the others stay as they are.
 * @param {HTMLElement} list
 * @param {Map<string, HTMLElement>} cards the cards shown, by entry id
 * @param {DeadLetterListed[]} entries
 * @param {(entry: DeadLetterListed) => HTMLElement} build
 * @param {boolean} filtered whether a filter selected them
 */
export function dlqListShow(list, cards, entries, build, filtered) {
  const ids = new Set(entries.map((e) => e.id));
  for (const [id, card] of cards) if (!ids.has(id)) { card.remove(); cards.delete(id); }
  const ordered = entries.map((e) => {
    if (!cards.has(e.id)) cards.set(e.id, build(e));
    return /** @type {HTMLElement} */ (cards.get(e.id));
  });
  if (ordered.length === 0) fill(list, empty(filtered ? 'No open dead letter matches.' : 'No open dead letters. Everything is flowing.'));
  else fill(list, ...ordered);
}
