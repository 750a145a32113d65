// @ts-check
// One approval's card: the output waiting for a person (as text), optionally edited as JSON, approved, or rejected
// with a comment.
import { api, errorText } from '../api.js';
import { h, fill, link, hrefDag, hrefTask, pre, when, flash } from '../dom.js';

/** @typedef {import('../../src/wire/approvals.js').ApprovalWaitingView} ApprovalWaitingView */
/** @typedef {import('../../src/wire/approvals.js').ApprovalDecisionAnswer} ApprovalDecisionAnswer */

/** The card's message line. @param {HTMLElement} card */
const msgOf = (card) => /** @type {HTMLElement} */ (card.querySelector('.action-msg'));

/**
 * Send a decision: the card's buttons wait, its message line says how it went.
 * @param {ApprovalWaitingView} a
 * @param {HTMLElement} card
 * @param {'approve' | 'reject'} decision
 * @param {{ comment?: string, output?: unknown }} body
 * @param {() => void} reload
 */
async function decide(a, card, decision, body, reload) {
  const out = msgOf(card);
  out.className = 'action-msg';
  out.textContent = decision === 'approve' ? 'Approving…' : 'Rejecting…';
  for (const b of card.querySelectorAll('button')) b.disabled = true;
  try {
    const r = /** @type {ApprovalDecisionAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(a.taskId)}/${decision}`, body));
    const done = decision === 'approve' ? 'Approved' : 'Rejected';
    flash(`${done} ${a.taskKey}.`);
    out.className = 'action-msg ok';
    out.textContent = `${done}; the task is ${r.outcome.status === 'rejected' ? r.outcome.failure.status : r.outcome.status}.`;
    card.classList.add('resolved');
    reload();
  } catch (err) {
    out.className = 'action-msg error';
    out.textContent = `${decision === 'approve' ? 'Approve' : 'Reject'} failed: ${errorText(err)}`;
    for (const b of card.querySelectorAll('button')) b.disabled = false;
  }
}

/**
 * @param {ApprovalWaitingView} a
 * @param {() => void} reload the list, once decided
 */
export function approvalCard(a, reload) {
  const card = h('article', { class: 'card approval', 'data-task-id': a.taskId, 'data-approval-id': a.id });
  const comment = h('input', { type: 'text', class: 'comment', placeholder: 'comment (required to reject)', maxlength: 10000, 'aria-label': 'comment' });
  const edit = h('textarea', { class: 'edit-output', rows: 6, hidden: true, 'aria-label': 'edited output (JSON)' });
  const editToggle = h('button', { type: 'button', 'data-action': 'edit' }, 'Edit output');
  editToggle.addEventListener('click', () => {
    edit.hidden = !edit.hidden;
    if (!edit.hidden && !edit.value) edit.value = JSON.stringify(a.output, null, 2);
  });
  const approve = h('button', { type: 'button', class: 'primary', 'data-action': 'approve' }, 'Approve');
  approve.addEventListener('click', () => {
    /** @type {{ comment?: string, output?: unknown }} */
    const body = {};
    if (comment.value.trim()) body.comment = comment.value.trim();
    if (!edit.hidden) {
      try {
        body.output = JSON.parse(edit.value);
      } catch (err) {
        const out = msgOf(card);
        out.className = 'action-msg error';
        out.textContent = `The edited output is not JSON: ${/** @type {Error} */ (err).message}`;
        return;
      }
    }
    void decide(a, card, 'approve', body, reload);
  });
  const reject = h('button', { type: 'button', class: 'danger', 'data-action': 'reject' }, 'Reject');
  reject.addEventListener('click', () => {
    if (!comment.value.trim()) {
      const out = msgOf(card);
      out.className = 'action-msg error';
      out.textContent = 'A rejection needs a comment: it is what the retry is told to fix.';
      return;
    }
    void decide(a, card, 'reject', { comment: comment.value.trim() }, reload);
  });
  fill(card,
    h('div', { class: 'head-row' }, h('h2', null, link(hrefTask(a.taskId), a.taskKey)),
      h('span', { class: 'muted' }, 'in ', link(hrefDag(a.dagId), a.dagName), a.step === null ? ' · approval task · waiting since ' : ` · step ${a.step + 1} · waiting since `, when(a.waitingSince),
        a.expiresAt ? [' · decide by ', when(a.expiresAt)] : null)),
    a.prompt ? h('p', { class: 'prompt' }, a.prompt) : null,
    a.step === null ? h('p', { class: 'muted small' }, 'Its upstream tasks\' outputs:') : null,
    pre(a.output, { class: 'approval-output' }),
    edit,
    h('div', { class: 'actions' }, comment, editToggle, approve, reject),
    h('p', { class: 'action-msg', role: 'status' }));
  return card;
}
