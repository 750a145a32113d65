// @ts-check
// A task's actions: set its priority, re-run it (a finished task runs again as new work, its history kept,
// optionally with everything downstream), cancel it with a note.
import { api, errorText } from '../api.js';
import { h, confirmButton } from '../dom.js';

/** @typedef {import('../../src/wire/tasks.js').TaskView} TaskView */
/** @typedef {import('../../src/wire/tasks.js').PriorityAnswer} PriorityAnswer */
/** @typedef {import('../../src/wire/tasks.js').TaskCancelAnswer} TaskCancelAnswer */
/** @typedef {import('../../src/wire/tasks.js').RerunAnswer} RerunAnswer */

/**
 * The bar of actions, its message line, and `show` to fit them to the task's state.
 * @param {string} taskId
 * @param {() => void} reload the page, once an action is done
 */
export function taskActions(taskId, reload) {
  const actionMsg = h('p', { class: 'action-msg', role: 'status' });
  const prio = h('input', { type: 'number', min: 0, max: 100, step: 1, id: 'priority-input', 'aria-label': 'priority (0 is most urgent)' });
  const cancelNote = h('input', { type: 'text', placeholder: 'note (optional)', 'aria-label': 'cancel note', maxlength: 2000 });
  /** @param {'ok' | 'error'} kind @param {string} text */
  const say = (kind, text) => {
    actionMsg.className = `action-msg ${kind}`;
    actionMsg.textContent = text;
  };

  const setPriority = h('button', { type: 'button', 'data-action': 'task-priority' }, 'Set priority');
  setPriority.addEventListener('click', async () => {
    const p = Number(prio.value);
    if (!Number.isInteger(p) || p < 0 || p > 100) return say('error', 'Priority must be a whole number from 0 (most urgent) to 100.');
    try {
      const r = /** @type {PriorityAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/priority`, { priority: p }));
      say('ok', `Priority set to ${p} (${r.tasks ?? 1} task).`);
      reload();
    } catch (err) {
      say('error', errorText(err));
    }
  });
  const cancelBtn = confirmButton('Cancel task', { 'data-action': 'task-cancel' }, async () => {
    try {
      const r = /** @type {TaskCancelAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/cancel`, cancelNote.value.trim() ? { note: cancelNote.value.trim() } : {}));
      say('ok', `Cancelled ${r.cancelled.length} task(s): ${r.cancelled.map((c) => c.key).join(', ')}`);
      reload();
    } catch (err) {
      say('error', errorText(err));
    }
  });
  const downstream = h('input', { type: 'checkbox', id: 'rerun-downstream' });
  const rerunLabel = h('label', null, downstream, ' and everything downstream');
  const rerunBtn = h('button', { type: 'button', 'data-action': 'task-rerun' }, 'Re-run');
  rerunBtn.addEventListener('click', async () => {
    rerunBtn.disabled = true;
    try {
      const r = /** @type {RerunAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/rerun`, downstream.checked ? { downstream: true } : {}));
      say('ok', `Running again: ${r.reopened.map((t) => `${t.key} (was ${t.previous})`).join(', ')}`);
      reload();
    } catch (err) {
      say('error', errorText(err));
    } finally {
      rerunBtn.disabled = false;
    }
  });
  const el = h('div', { class: 'card actions-bar' },
    h('label', null, 'Priority ', prio), setPriority,
    h('span', { class: 'spacer' }),
    rerunBtn, rerunLabel,
    cancelNote, cancelBtn);

  /**
   * @param {TaskView} t
   * @param {boolean} first the page's first load: the priority field starts at the task's
   */
  const show = (t, first) => {
    if (first) prio.value = String(t.priority);
    const finished = ['completed', 'cancelled'].includes(t.status);
    cancelBtn.hidden = finished;
    cancelNote.hidden = finished;
    const rerunnable = ['completed', 'dead_lettered', 'cancelled'].includes(t.status);
    rerunBtn.hidden = !rerunnable;
    rerunLabel.hidden = !rerunnable;
  };
  return { el, actionMsg, show };
}
