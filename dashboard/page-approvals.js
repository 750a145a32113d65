// @ts-check
// Approval steps waiting for a person: read the output, optionally edit it, approve or reject with a comment
// (each one's card: approvals/card.js).
import { api } from './api.js';
import { h, fill, main, empty, pageError } from './dom.js';
import { approvalCard } from './approvals/card.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/approvals.js').ApprovalListAnswer} ApprovalListAnswer */

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

  const load = ctx.refetcher({
    load: () => /** @type {Promise<ApprovalListAnswer>} */ (api('GET', '/api/approvals')),
    apply: ({ approvals }) => {
      const seen = new Set(approvals.map((a) => a.id));
      for (const [id, card] of cards) if (!seen.has(id) && !card.classList.contains('resolved')) cards.delete(id);
      for (const a of approvals) if (!cards.has(a.id)) cards.set(a.id, approvalCard(a, () => void load.now()));
      if (cards.size === 0) return fill(list, empty('No approval is waiting.'));
      fill(list, ...cards.values());
    },
    fail: (err) => fill(list, pageError(err)),
  });
  void load.now();
  // A new approval, or one decided elsewhere, shows within a moment.
  ctx.onGlobal((e) => { if (['task.waiting', 'task.approved', 'task.rejected', 'task.cancelled'].includes(e.type)) load.soon(); });
}
