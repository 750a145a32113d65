// @ts-check
// One task: spec, resolved inputs, output, validation verdicts, attempts and events, with priority, re-run and
// cancel actions (task/actions.js), its streams (task/streams.js), log (task-log.js) and durable steps
// (task/steps.js), followed live on its DAG's stream.
import { api } from './api.js';
import { taskLogPanel } from './task-log.js';
import { h, fill, main, pageError } from './dom.js';
import { taskActions } from './task/actions.js';
import { taskContent, taskHead } from './task/content.js';
import { taskStepsPanel } from './task/steps.js';
import { taskStreamsPanel } from './task/streams.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/tasks.js').TaskShowAnswer} TaskShowAnswer */
/** @typedef {import('../src/wire/tasks.js').TaskView} TaskView */

/**
 * @param {PageContext} ctx
 * @param {string} taskId
 */
export function pageTask(ctx, taskId) {
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Task'));
  const content = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const actions = taskActions(taskId, () => void load.now());
  const log = taskLogPanel(ctx, taskId);
  const steps = taskStepsPanel(ctx, taskId);
  const streams = taskStreamsPanel(ctx, taskId);
  fill(main, head, actions.el, actions.actionMsg, content);
  /** @type {TaskView | undefined} */
  let task;

  let streaming = false;
  /** @param {TaskShowAnswer} answer */
  const apply = (answer) => {
    const t = answer.task;
    const first = !task;
    task = t;
    actions.show(t, first);
    taskHead(head, t);
    taskContent(content, answer, { streams: streams.el, log: log.el, steps: steps.el });
    // A new attempt, or the end of one: the log panel catches up (it polls on its own while an attempt runs). Every
    // event of the task reloads it, so a step recorded or replayed (task.step_recorded, task.step_replayed), or a
    // re-run that deleted them, reloads its steps too.
    void log.refresh();
    steps.refresh();
    // A new attempt's stream is followed from its start (the previous one's end came on its own connection).
    streams.refresh(t);
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
    fail: (err) => { if (!task) { actions.el.hidden = true; fill(content, pageError(err)); } },
  });
  void load.now();
}
