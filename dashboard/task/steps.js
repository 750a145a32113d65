// @ts-check
// A task's durable steps on its page (GET /api/tasks/:id/steps): what its attempts recorded, and what later attempts
// replayed instead of paying for it again. Step names are the agent's text: inserted as text, like everything else.
import { api, errorText } from '../api.js';
import { h, fill, table, usd, when, duration } from '../dom.js';

/** @typedef {import('../live.js').PageContext} PageContext */
/** @typedef {import('../../src/wire/steps.js').StepListAnswer} StepListAnswer */

/** @param {number} n bytes */
function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * The section, or nothing when the task has recorded no step.
 * @param {StepListAnswer} answer
 */
function stepsSection({ steps, replays }) {
  if (steps.length === 0 && replays.length === 0) return null;
  const saved = replays.reduce((sum, r) => sum + r.costUsd, 0);
  return h('section', { class: 'card' }, h('h2', null, 'Durable steps'),
    table(['Name', 'Scope', 'Attempt', 'Recorded', 'Size', 'Duration', 'Cost', 'Tokens in/out'],
      steps.map((s) => h('tr', { 'data-step': s.name, 'data-fence': s.fence },
        h('td', { class: 'mono' }, s.name), h('td', null, s.scope), h('td', { class: 'num' }, String(s.attempt)),
        h('td', null, when(s.recordedAt)), h('td', { class: 'num' }, size(s.sizeBytes)), h('td', { class: 'num' }, duration(s.durationMs)),
        h('td', { class: 'num' }, usd(s.costUsd)), h('td', { class: 'num' }, `${s.tokensIn} / ${s.tokensOut}`))),
      { id: 'task-steps-recorded' }),
    replays.length ? [
      h('h3', null, `Replayed (${replays.length}, ${usd(saved)} not paid again)`),
      table(['Name', 'Replayed by attempt', 'When', 'Not paid again'],
        replays.map((r) => h('tr', { 'data-step': r.name, 'data-fence': r.fence },
          h('td', { class: 'mono' }, r.name), h('td', { class: 'num' }, String(r.attempt)), h('td', null, when(r.replayedAt)),
          h('td', { class: 'num' }, usd(r.costUsd)))),
        { id: 'task-steps-replayed' }),
    ] : null);
}

/**
 * The durable-steps panel of a task's page: `el` (empty while the task has no step) and `refresh` to read them again,
 * within a moment (the page calls it whenever its task changes, a step recorded or replayed included).
 * @param {PageContext} ctx
 * @param {string} taskId
 */
export function taskStepsPanel(ctx, taskId) {
  const el = h('div', { id: 'task-steps' });
  const load = ctx.refetcher({
    load: () => /** @type {Promise<StepListAnswer>} */ (api('GET', `/api/tasks/${encodeURIComponent(taskId)}/steps`)),
    apply: (answer) => {
      fill(el, stepsSection(answer));
      // What the last answer held, for a reader (or a test) to tell "none yet" from "not read yet".
      el.dataset.recorded = String(answer.steps.length);
      el.dataset.replayed = String(answer.replays.length);
    },
    fail: (err) => { fill(el, h('p', { class: 'error' }, `Could not load the durable steps: ${errorText(err)}`)); },
  });
  return { el, refresh: load.soon };
}
