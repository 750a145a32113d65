// @ts-check
// Approval steps waiting for a person: read the output, optionally edit it, approve or reject with a comment.
import { api, errorText } from './api.js';
import { h, fill, main, link, hrefDag, hrefTask, pre, empty, when, flash, pageError } from './dom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/approvals.js').ApprovalWaitingView} ApprovalWaitingView */
/** @typedef {import('../src/wire/approvals.js').ApprovalListAnswer} ApprovalListAnswer */
/** @typedef {import('../src/wire/approvals.js').ApprovalDecisionAnswer} ApprovalDecisionAnswer */

/** @param {PageContext} ctx */
export function pageApprovals(ctx) {
  const list = h('div', { class: 'approval-list' }, h('p', { class: 'muted' }, 'Loading…'));
  fill(main,
    h('div', { class: 'page-head' }, h('h1', null, 'Approvals'),
      h('p', { class: 'muted' }, 'Outputs waiting for a person. Approve one (optionally replacing it first), or reject it with a comment: the task runs again and its agent is told why.')),
    list);

  /**
   * Cards stay the same elements across refetches, so a typed comment or an edit survives live updates.
   * Keyed by the approval's own task: a rejected output that comes back is a new approval of the same task.
   * @type {Map<string, HTMLElement>}
   */
  const cards = new Map();

  /** The card's message line. @param {HTMLElement} card */
  const msgOf = (card) => /** @type {HTMLElement} */ (card.querySelector('.action-msg'));

  /**
   * @param {ApprovalWaitingView} a
   * @param {HTMLElement} card
   * @param {'approve' | 'reject'} decision
   * @param {{ comment?: string, output?: unknown }} body
   */
  const decide = async (a, card, decision, body) => {
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
      void load.now();
    } catch (err) {
      out.className = 'action-msg error';
      out.textContent = `${decision === 'approve' ? 'Approve' : 'Reject'} failed: ${errorText(err)}`;
      for (const b of card.querySelectorAll('button')) b.disabled = false;
    }
  };

  /** @param {ApprovalWaitingView} a */
  const buildCard = (a) => {
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
      void decide(a, card, 'approve', body);
    });
    const reject = h('button', { type: 'button', class: 'danger', 'data-action': 'reject' }, 'Reject');
    reject.addEventListener('click', () => {
      if (!comment.value.trim()) {
        const out = msgOf(card);
        out.className = 'action-msg error';
        out.textContent = 'A rejection needs a comment: it is what the retry is told to fix.';
        return;
      }
      void decide(a, card, 'reject', { comment: comment.value.trim() });
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
  };

  const load = ctx.refetcher({
    load: () => /** @type {Promise<ApprovalListAnswer>} */ (api('GET', '/api/approvals')),
    apply: ({ approvals }) => {
      const seen = new Set(approvals.map((a) => a.id));
      for (const [id, card] of cards) if (!seen.has(id) && !card.classList.contains('resolved')) cards.delete(id);
      for (const a of approvals) if (!cards.has(a.id)) cards.set(a.id, buildCard(a));
      if (cards.size === 0) return fill(list, empty('No approval is waiting.'));
      fill(list, ...cards.values());
    },
    fail: (err) => fill(list, pageError(err)),
  });
  void load.now();
  // A new approval, or one decided elsewhere, shows within a moment.
  ctx.onGlobal((e) => { if (['task.waiting', 'task.approved', 'task.rejected', 'task.cancelled'].includes(e.type)) load.soon(); });
}
