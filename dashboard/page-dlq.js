// @ts-check
// The dead-letter queue: retry, edit & retry, or cancel each open entry; search, filter and page through them on
// the server, and retry or cancel every entry a filter matches at once.
import { api, errorText } from './api.js';
import { h, add, fill, main, link, hrefDag, hrefTask, table, empty, usd, when, duration, flash, pageError, verdictRows, confirmButton } from './dom.js';
import { DLQ_EVENTS, dlqCountRefreshSoon } from './live.js';
import { filterForm, pagedList } from './list-filter.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/dlq.js').DeadLetterListed} DeadLetterListed */
/** @typedef {import('../src/wire/dlq.js').HistoryAttempt} HistoryAttempt */
/** @typedef {import('../src/wire/dlq.js').DlqPageAnswer} DlqPageAnswer */
/** @typedef {import('../src/wire/dlq.js').DlqShowAnswer} DlqShowAnswer */
/** @typedef {import('../src/wire/dlq.js').DlqBulkAnswer} DlqBulkAnswer */
/** What an edit changes, with the API's field names. @typedef {{ prompt?: string, input?: object, priority?: number, max_attempts?: number }} TaskEdit */

/** Entries per page. */
export const DLQ_PAGE = 50;

/** @param {HistoryAttempt[] | undefined} history */
function historyTable(history) {
  if (!history?.length) return empty('No attempts recorded.');
  return table(['#', 'Agent', 'Outcome', 'Error class', 'Error', 'Duration', 'Cost'], history.map((a) => h('tr', null,
    h('td', { class: 'num' }, String(a.attempt)), h('td', null, a.agent ?? ''),
    h('td', null, h('span', { class: `outcome ${a.outcome}` }, a.outcome ?? '')), h('td', null, a.error_class ?? ''),
    h('td', { class: 'small clip' }, a.error ?? ''), h('td', { class: 'num' }, duration(a.duration_ms)), h('td', { class: 'num' }, usd(a.cost_usd)))),
  { class: 'history' });
}

/**
 * @param {PageContext} ctx
 * @param {string} [selectedId] the entry to show open (`#/dlq/<id>`)
 */
export function pageDlq(ctx, selectedId) {
  const list = h('div', { class: 'dlq-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const pager = pagedList(DLQ_PAGE, () => void load.now());
  const filters = filterForm([
    { name: 'q', label: 'Task key, reason or id', type: 'search' },
    { name: 'error_class', label: 'Error class', type: 'text' },
    { name: 'type', label: 'Task type', type: 'text' },
    { name: 'dag_id', label: 'DAG id', type: 'text' },
    { name: 'from', label: 'From', type: 'date' },
    { name: 'to', label: 'To', type: 'date' },
  ], (p) => pager.filter(p));

  // Every open entry the filter matches, at once (up to 1,000, one transaction): the same filter as the list's.
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
      void load.now();
    } catch (err) {
      bulkMsg.className = 'action-msg error';
      bulkMsg.textContent = `Bulk ${action} failed: ${errorText(err)}`;
    }
  };
  const bulkBar = h('div', { class: 'card actions-bar bulk' }, h('strong', null, 'All matching: '), bulkNote, h('label', { class: 'check' }, bulkReset, ' reset attempts'),
    confirmButton('Retry all matching', { class: 'primary', 'data-action': 'bulk-retry' }, () => bulk('retry')),
    confirmButton('Cancel all matching', { 'data-action': 'bulk-cancel' }, () => bulk('cancel')), bulkMsg);
  fill(main, 
    h('div', { class: 'page-head' }, h('h1', null, 'Dead letters'),
      h('p', { class: 'muted' }, 'Tasks that used up their attempts or failed in a way retrying cannot fix. Retry them (optionally with a fresh attempt budget), edit their spec and retry, or cancel them and what depends on them.')),
    filters.el, bulkBar, list, pager.el);

  /** Entries stay the same elements across refetches, so typed notes and open forms survive live updates. */
  /** @type {Map<string, HTMLElement>} */
  const cards = new Map();
  let selected = selectedId;

  const DONE = { Retry: 'Retried', Cancel: 'Cancelled', 'Edit & retry': 'Edited and retried' };
  /**
   * @param {DeadLetterListed} entry
   * @param {HTMLElement} card
   * @param {keyof typeof DONE} what
   * @param {() => Promise<unknown>} call
   */
  const act = async (entry, card, what, call) => {
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
      void load.now();
    } catch (err) {
      out.className = 'action-msg error';
      out.textContent = `${what} failed: ${errorText(err)}`;
      for (const b of card.querySelectorAll('button')) b.disabled = false;
    }
  };

  /** @param {DeadLetterListed} entry */
  const buildCard = (entry) => {
    const path = `/api/dlq/${encodeURIComponent(entry.id)}`;
    const note = h('input', { type: 'text', class: 'note', placeholder: 'note (required to cancel)', maxlength: 2000, 'aria-label': 'note', 'data-id': entry.id });
    const reset = h('input', { type: 'checkbox', class: 'reset', 'data-id': entry.id });
    const out = h('p', { class: 'action-msg', role: 'status' });
    const details = h('div', { class: 'dlq-details' });
    const editBox = h('div', { class: 'edit-box', hidden: true });
    const card = h('article', { class: 'card dlq-entry', 'data-id': entry.id });

    const noteBody = () => {
      /** @type {{ note?: string }} */
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
    /** The fields as the task had them. @type {{ prompt?: string, input?: string, priority?: string, maxAttempts?: string }} */
    let original = {};
    /** @returns {{ value?: object, error?: string }} */
    const parseInput = () => {
      const text = input.value.trim();
      if (!text) return { value: undefined };
      try {
        const v = JSON.parse(text);
        if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: 'Input must be a JSON object, like {"key": "value"}.' };
        return { value: v };
      } catch (err) {
        return { error: `Input is not valid JSON: ${/** @type {Error} */ (err).message}` };
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
        const { task } = /** @type {DlqShowAnswer} */ (await api('GET', path));
        const was = {
          prompt: task.spec?.prompt ?? '', input: JSON.stringify(task.spec?.input ?? {}, null, 2),
          priority: String(task.priority), maxAttempts: String(task.maxAttempts),
        };
        original = was;
        prompt.value = was.prompt;
        input.value = was.input;
        priority.value = was.priority;
        maxAttempts.value = was.maxAttempts;
        checkInput();
      } catch (err) {
        filled = false;
        inputErr.textContent = `Could not load the task: ${errorText(err)}`;
      }
    }
    submit.addEventListener('click', () => {
      const parsed = checkInput();
      if (parsed.error) return;
      /** @type {TaskEdit} */
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
    /** @param {boolean} open */
    const select = (open) => {
      card.classList.toggle('selected', open);
      details.hidden = !open;
      toggle.setAttribute('aria-expanded', String(open));
      toggle.textContent = open ? 'Hide failure history' : 'Show failure history';
      if (open) {
        selected = entry.id;
        void historyLoad();
      }
    };
    // The list carries no history (it can be long); it is fetched when first shown.
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

    add(details, h('p', { class: 'muted' }, 'Loading…'));
    select(entry.id === selected);
    return card;
  };

  let first = true;
  const load = ctx.refetcher({
    load: () => /** @type {Promise<DlqPageAnswer>} */ (api('GET', `/api/dlq${pager.query()}`)),
    apply: ({ entries, next }) => {
      pager.loaded(next, entries.length);
      const ids = new Set(entries.map((e) => e.id));
      for (const [id, card] of cards) if (!ids.has(id)) { card.remove(); cards.delete(id); }
      const ordered = entries.map((e) => {
        if (!cards.has(e.id)) cards.set(e.id, buildCard(e));
        return /** @type {HTMLElement} */ (cards.get(e.id));
      });
      if (ordered.length === 0) fill(list, empty(Object.keys(pager.current()).length ? 'No open dead letter matches.' : 'No open dead letters. Everything is flowing.'));
      else fill(list, ...ordered);
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
