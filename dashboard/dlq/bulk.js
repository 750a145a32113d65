// @ts-check
// Every open entry the list's filter matches, retried or cancelled at once (up to 1,000, one transaction): the
// same filter as the list's, sent to POST /api/dlq/bulk.
import { api, errorText } from '../api.js';
import { h, flash, confirmButton } from '../dom.js';
import { dlqCountRefreshSoon } from '../live.js';

/** @typedef {import('../../src/wire/dlq.js').DlqBulkAnswer} DlqBulkAnswer */
/** @typedef {import('../list-filter.js').FilterParams} FilterParams */

/**
 * The bar of the bulk actions.
 * @param {{ current: () => FilterParams }} pager the list's pager: its filter
 * @param {() => void} reload the list, once an action is done
 */
export function dlqBulkBar(pager, reload) {
  const bulkNote = h('input', { type: 'text', class: 'note', placeholder: 'note (required to cancel)', maxlength: 2000, 'aria-label': 'bulk note' });
  const bulkReset = h('input', { type: 'checkbox', class: 'reset' });
  const bulkMsg = h('p', { class: 'action-msg', role: 'status', id: 'dlq-bulk-msg' });
  /** @param {'retry' | 'cancel'} action */
  const bulk = async (action) => {
    const filter = pager.current();
    if (Object.keys(filter).length === 0) {
      bulkMsg.className = 'action-msg error';
      bulkMsg.textContent = 'Filter the list first: a bulk action applies to the entries a filter matches.';
      return;
    }
    if (action === 'cancel' && !bulkNote.value.trim()) {
      bulkMsg.className = 'action-msg error';
      bulkMsg.textContent = 'A note is required to cancel: say why these tasks are given up.';
      return;
    }
    try {
      const r = /** @type {DlqBulkAnswer} */ (await api('POST', '/api/dlq/bulk', { action, filter, ...(bulkNote.value.trim() ? { note: bulkNote.value.trim() } : {}), ...(action === 'retry' ? { reset_attempts: bulkReset.checked } : {}) }));
      bulkMsg.className = 'action-msg ok';
      bulkMsg.textContent = `${action === 'retry' ? 'Retried' : 'Cancelled'} ${r.ids.length} task(s).`;
      flash(bulkMsg.textContent);
      dlqCountRefreshSoon();
      reload();
    } catch (err) {
      bulkMsg.className = 'action-msg error';
      bulkMsg.textContent = `Bulk ${action} failed: ${errorText(err)}`;
    }
  };
  return h('div', { class: 'card actions-bar bulk' }, h('strong', null, 'All matching: '), bulkNote, h('label', { class: 'check' }, bulkReset, ' reset attempts'),
    confirmButton('Retry all matching', { class: 'primary', 'data-action': 'bulk-retry' }, () => bulk('retry')),
    confirmButton('Cancel all matching', { 'data-action': 'bulk-cancel' }, () => bulk('cancel')), bulkMsg);
}
