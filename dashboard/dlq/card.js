// @ts-check
// One dead letter's card: what failed and why, its actions (retry, edit & retry, cancel with a note) and its
// failure history, fetched when first shown (the list carries none: it can be long).
import { api, errorText } from '../api.js';
import { h, add, fill, link, hrefDag, hrefTask, table, empty, usd, when, duration, flash, verdictRows } from '../dom.js';
import { dlqCountRefreshSoon } from '../live.js';
import { dlqEditForm } from './edit.js';

/** @typedef {import('../../src/wire/dlq.js').DeadLetterListed} DeadLetterListed */
/** @typedef {import('../../src/wire/dlq.js').DlqShowAnswer} DlqShowAnswer */
/** @typedef {import('../../src/wire/dlq.js').HistoryAttempt} HistoryAttempt */
/**
 * What a card asks of its list: the entry shown open (one at a time, it follows the link's id), and a reload once
 * an action resolved the entry.
 * @typedef {{ selected: () => string | undefined, onSelect: (id: string) => void, reload: () => void }} CardHooks
 */

/** @param {HistoryAttempt[] | undefined} history */
function historyTable(history) {
  if (!history?.length) return empty('No attempts recorded.');
  return table(['#', 'Agent', 'Outcome', 'Error class', 'Error', 'Duration', 'Cost'], history.map((a) => h('tr', null,
    h('td', { class: 'num' }, String(a.attempt)), h('td', null, a.agent ?? ''),
    h('td', null, h('span', { class: `outcome ${a.outcome}` }, a.outcome ?? '')), h('td', null, a.error_class ?? ''),
    h('td', { class: 'small clip' }, a.error ?? ''), h('td', { class: 'num' }, duration(a.duration_ms)), h('td', { class: 'num' }, usd(a.cost_usd)))),
  { class: 'history' });
}

const DONE = { Retry: 'Retried', Cancel: 'Cancelled', 'Edit & retry': 'Edited and retried' };

/**
 * Run one of the card's actions: its buttons wait, its message line says how it went.
 * @param {DeadLetterListed} entry
 * @param {HTMLElement} card
 * @param {keyof typeof DONE} what
 * @param {() => Promise<unknown>} call
 * @param {() => void} reload
 */
async function act(entry, card, what, call, reload) {
  const out = /** @type {HTMLElement} */ (card.querySelector('.action-msg'));
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
    reload();
  } catch (err) {
    out.className = 'action-msg error';
    out.textContent = `${what} failed: ${errorText(err)}`;
    for (const b of card.querySelectorAll('button')) b.disabled = false;
  }
}

/**
 * The failure history's toggle, and `select` to open or close the card (opening fetches the history once).
 * @param {DeadLetterListed} entry
 * @param {HTMLElement} card
 * @param {HTMLElement} details where the history goes
 * @param {CardHooks} hooks
 */
function historyPanel(entry, card, details, hooks) {
  const toggle = h('button', { type: 'button', class: 'link', 'aria-expanded': 'false' }, 'Show failure history');
  /** @param {boolean} open */
  const select = (open) => {
    card.classList.toggle('selected', open);
    details.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    toggle.textContent = open ? 'Hide failure history' : 'Show failure history';
    if (open) {
      hooks.onSelect(entry.id);
      void historyLoad();
    }
  };
  /** @type {Promise<void> | undefined} */
  let historyLoading;
  const historyLoad = () => historyLoading ??= /** @type {Promise<DlqShowAnswer>} */ (api('GET', `/api/dlq/${encodeURIComponent(entry.id)}`)).then(({ entry: full }) => {
    const verdicts = verdictRows((full.history ?? []).map((a) => ({ attempt: a.attempt, details: a.details })));
    fill(details, h('h3', null, 'Failure history'), historyTable(full.history),
      verdicts.length ? [h('h3', null, 'Validation verdicts'), table(['Attempt', 'Step', 'Kind', 'Verdict', 'Score', 'Reasons'], verdicts, { class: 'verdicts' })] : null);
  }).catch((err) => {
    historyLoading = undefined;
    fill(details, h('p', { class: 'error' }, `Could not load the history: ${errorText(err)}`));
  });
  toggle.addEventListener('click', () => select(details.hidden));
  return { toggle, select };
}

/**
 * The card of an open entry.
 * @param {DeadLetterListed} entry
 * @param {CardHooks} hooks
 */
export function dlqCard(entry, hooks) {
  const path = `/api/dlq/${encodeURIComponent(entry.id)}`;
  const note = h('input', { type: 'text', class: 'note', placeholder: 'note (required to cancel)', maxlength: 2000, 'aria-label': 'note', 'data-id': entry.id });
  const reset = h('input', { type: 'checkbox', class: 'reset', 'data-id': entry.id });
  const out = h('p', { class: 'action-msg', role: 'status' });
  const details = h('div', { class: 'dlq-details' });
  const card = h('article', { class: 'card dlq-entry', 'data-id': entry.id });
  /** @param {keyof typeof DONE} what @param {() => Promise<unknown>} call */
  const run = (what, call) => act(entry, card, what, call, hooks.reload);

  const noteBody = () => {
    /** @type {{ note?: string }} */
    const b = {};
    if (note.value.trim()) b.note = note.value.trim();
    return b;
  };
  const history = historyPanel(entry, card, details, hooks);
  const editForm = dlqEditForm(entry, path, out, (e) => void run('Edit & retry', () => api('POST', `${path}/edit-retry`, { edit: e, ...noteBody(), reset_attempts: reset.checked })));
  const retry = h('button', { type: 'button', class: 'primary', 'data-action': 'retry', 'data-id': entry.id }, 'Retry');
  retry.addEventListener('click', () => run('Retry', () => api('POST', `${path}/retry`, { ...noteBody(), reset_attempts: reset.checked })));
  const edit = h('button', { type: 'button', 'data-action': 'edit', 'data-id': entry.id }, 'Edit & retry…');
  edit.addEventListener('click', () => {
    editForm.el.hidden = !editForm.el.hidden;
    if (!editForm.el.hidden) { history.select(true); void editForm.fill(); }
  });
  const cancel = h('button', { type: 'button', class: 'danger', 'data-action': 'cancel', 'data-id': entry.id }, 'Cancel task');
  cancel.addEventListener('click', () => {
    if (!note.value.trim()) {
      out.className = 'action-msg error';
      out.textContent = 'A note is required to cancel: say why this task is given up.';
      note.focus();
      return;
    }
    void run('Cancel', () => api('POST', `${path}/cancel`, noteBody()));
  });

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
    out, editForm.el, history.toggle, details);

  add(details, h('p', { class: 'muted' }, 'Loading…'));
  history.select(entry.id === hooks.selected());
  return card;
}
