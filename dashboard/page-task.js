// @ts-check
// One task: spec, resolved inputs, output, validation verdicts, attempts and
// events, with priority, re-run and cancel actions.
import { api, errorText } from './api.js';
import { taskLogPanel } from './task-log.js';
import { h, fill, main, link, hrefDag, badge, pre, chips, table, section, empty, usd, when, duration, confirmButton, pageError, verdictRows } from './dom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/tasks.js').TaskShowAnswer} TaskShowAnswer */
/** @typedef {import('../src/wire/tasks.js').TaskView} TaskView */
/** @typedef {import('../src/wire/tasks.js').TaskBodyView} TaskBodyView */
/** @typedef {import('../src/wire/tasks.js').PriorityAnswer} PriorityAnswer */
/** @typedef {import('../src/wire/tasks.js').TaskCancelAnswer} TaskCancelAnswer */
/** @typedef {import('../src/wire/tasks.js').RerunAnswer} RerunAnswer */

/**
 * @param {PageContext} ctx
 * @param {string} taskId
 */
export function pageTask(ctx, taskId) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Task'));
  const actionMsg = h('p', { class: 'action-msg', role: 'status' });
  const content = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const prio = h('input', { type: 'number', min: 0, max: 100, step: 1, id: 'priority-input', 'aria-label': 'priority (0 is most urgent)' });
  const cancelNote = h('input', { type: 'text', placeholder: 'note (optional)', 'aria-label': 'cancel note', maxlength: 2000 });
  /** @type {TaskView | undefined} */
  let task;

  const setPriority = h('button', { type: 'button', 'data-action': 'task-priority' }, 'Set priority');
  setPriority.addEventListener('click', async () => {
    const p = Number(prio.value);
    if (!Number.isInteger(p) || p < 0 || p > 100) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = 'Priority must be a whole number from 0 (most urgent) to 100.';
      return;
    }
    try {
      const r = /** @type {PriorityAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/priority`, { priority: p }));
      actionMsg.className = 'action-msg ok';
      actionMsg.textContent = `Priority set to ${p} (${r.tasks ?? 1} task).`;
      void load.now();
    } catch (err) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = errorText(err);
    }
  });
  const cancelBtn = confirmButton('Cancel task', { 'data-action': 'task-cancel' }, async () => {
    try {
      const r = /** @type {TaskCancelAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/cancel`, cancelNote.value.trim() ? { note: cancelNote.value.trim() } : {}));
      actionMsg.className = 'action-msg ok';
      actionMsg.textContent = `Cancelled ${r.cancelled.length} task(s): ${r.cancelled.map((c) => c.key).join(', ')}`;
      void load.now();
    } catch (err) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = errorText(err);
    }
  });
  // A finished task (completed, dead-lettered, cancelled) runs again as new work, its history kept.
  const downstream = h('input', { type: 'checkbox', id: 'rerun-downstream' });
  const rerunLabel = h('label', null, downstream, ' and everything downstream');
  const rerunBtn = h('button', { type: 'button', 'data-action': 'task-rerun' }, 'Re-run');
  rerunBtn.addEventListener('click', async () => {
    rerunBtn.disabled = true;
    try {
      const r = /** @type {RerunAnswer} */ (await api('POST', `/api/tasks/${encodeURIComponent(taskId)}/rerun`, downstream.checked ? { downstream: true } : {}));
      actionMsg.className = 'action-msg ok';
      actionMsg.textContent = `Running again: ${r.reopened.map((t) => `${t.key} (was ${t.previous})`).join(', ')}`;
      void load.now();
    } catch (err) {
      actionMsg.className = 'action-msg error';
      actionMsg.textContent = errorText(err);
    } finally {
      rerunBtn.disabled = false;
    }
  });
  const actions = h('div', { class: 'card actions-bar' },
    h('label', null, 'Priority ', prio), setPriority,
    h('span', { class: 'spacer' }),
    rerunBtn, rerunLabel,
    cancelNote, cancelBtn);
  const log = taskLogPanel(ctx, taskId);
  fill(main, head, actions, actionMsg, content);

  let streaming = false;
  /** @param {TaskShowAnswer} answer */
  const apply = ({ task: t, inputs, attempts, events }) => {
    const first = !task;
    task = t;
    if (first) prio.value = String(t.priority);
    const finished = ['completed', 'cancelled'].includes(t.status);
    cancelBtn.hidden = finished;
    cancelNote.hidden = finished;
    const rerunnable = ['completed', 'dead_lettered', 'cancelled'].includes(t.status);
    rerunBtn.hidden = !rerunnable;
    rerunLabel.hidden = !rerunnable;
    fill(head, 
      h('div', { class: 'crumbs small' }, link(hrefDag(t.dagId), t.dagId), ' / task'),
      h('div', { class: 'head-row' }, h('h1', null, t.key), badge(t.status, { id: 'task-status' }), h('span', { class: 'chip' }, t.type)),
      t.title ? h('p', { class: 'muted' }, t.title) : null,
      h('div', { class: 'facts' },
        h('span', null, 'Attempts ', `${t.attempts}/${t.maxAttempts}`),
        h('span', null, 'Priority ', String(t.priority), ` (effective ${Number(t.effectivePriority).toFixed(1)})`),
        t.claimedBy ? h('span', null, 'Claimed by ', t.claimedBy) : null,
        h('span', null, 'Cost ', usd(t.costUsd)),
        h('span', null, 'Created ', when(t.createdAt)),
        t.completedAt ? h('span', null, 'Completed ', when(t.completedAt)) : null,
        h('span', { class: 'muted mono' }, t.id)),
      t.lastError ? h('p', { class: 'error' }, 'Last error: ', t.lastError) : null);

    const spec = /** @type {Partial<TaskBodyView>} */ (t.spec ?? {});
    const verdicts = verdictRows(attempts);
    fill(content, 
      section('Spec',
        h('dl', { class: 'spec' },
          h('dt', null, 'Prompt'), h('dd', null, spec.prompt ? h('pre', { class: 'prompt' }, spec.prompt) : h('span', { class: 'muted' }, 'none')),
          h('dt', null, 'Input'), h('dd', null, spec.input && Object.keys(spec.input).length ? pre(spec.input) : h('span', { class: 'muted' }, 'none')),
          h('dt', null, 'Models'), h('dd', null, chips(spec.models)),
          spec.fallbackModels?.length ? [h('dt', null, 'Fallback models'), h('dd', null, chips(spec.fallbackModels))] : null,
          h('dt', null, 'Required capabilities'), h('dd', null, chips(t.requiredCapabilities)),
          spec.context?.length ? [h('dt', null, 'Context'), h('dd', null, chips(spec.context.map((c) => (typeof c === 'string' ? c : JSON.stringify(c)))))] : null,
          t.outputSpec ? [h('dt', null, 'Output spec'), h('dd', null, pre(t.outputSpec))] : null)),
      section('Resolved inputs', inputs && Object.keys(inputs).length ? pre(inputs, { id: 'task-inputs' }) : empty('No upstream context.')),
      section('Output', t.output !== null && t.output !== undefined ? pre(t.output, { id: 'task-output' }) : empty('No output yet.')),
      // The same element each time: its lines and live polling survive the page's re-renders.
      log.el,
      section('Validation verdicts', verdicts.length
        ? table(['Attempt', 'Step', 'Kind', 'Verdict', 'Score', 'Reasons'], verdicts, { class: 'verdicts' })
        : empty('No validation verdicts.')),
      section('Attempts', attempts.length ? table(['#', 'Fence', 'Agent', 'Outcome', 'Error class', 'Error', 'Started', 'Duration', 'Cost'],
        attempts.map((a) => h('tr', { 'data-attempt': a.attempt },
          h('td', { class: 'num' }, String(a.attempt)), h('td', { class: 'num' }, String(a.fence)), h('td', null, a.agentId ?? ''),
          h('td', null, h('span', { class: `outcome ${a.outcome}` }, a.outcome)), h('td', null, a.errorClass ?? ''),
          h('td', { class: 'small clip' }, a.errorMessage ?? ''), h('td', null, when(a.startedAt)),
          h('td', { class: 'num' }, duration(a.durationMs)), h('td', { class: 'num' }, usd(a.costUsd)))),
        { id: 'attempts' }) : empty('No attempts yet.')),
      section('Events', events.length ? h('ol', { class: 'events' }, events.map((e) => h('li', null,
        when(e.at), ' ', h('strong', null, e.type), e.agentId ? h('span', { class: 'muted' }, ` by ${e.agentId}`) : null,
        e.data && Object.keys(/** @type {object} */ (e.data)).length ? h('code', { class: 'small' }, ` ${JSON.stringify(e.data)}`) : null))) : empty('No events.')));

    // A new attempt, or the end of one: the log panel catches up (it polls on its own while an attempt runs).
    void log.refresh();
    if (!streaming) {
      streaming = true;
      ctx.stream(`?dag_id=${encodeURIComponent(t.dagId)}`, (e) => {
        if (e.type === 'snapshot' || e.type === 'close') return;
        if (e.data?.taskId === taskId) load.soon();
      });
    }
  };

  const load = ctx.refetcher({
    load: () => /** @type {Promise<TaskShowAnswer>} */ (api('GET', `/api/tasks/${encodeURIComponent(taskId)}`)),
    apply,
    fail: (err) => { if (!task) { actions.hidden = true; fill(content, pageError(err)); } },
  });
  void load.now();
}
