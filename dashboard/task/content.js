// @ts-check
// What a task's page shows of it: its header, spec, resolved inputs, output, streams, log, validation verdicts,
// attempts, durable steps and events.
import { h, fill, link, hrefDag, badge, pre, chips, table, section, empty, usd, when, duration, verdictRows } from '../dom.js';

/** @typedef {import('../../src/wire/tasks.js').TaskShowAnswer} TaskShowAnswer */
/** @typedef {import('../../src/wire/tasks.js').TaskView} TaskView */
/** @typedef {import('../../src/wire/tasks.js').TaskBodyView} TaskBodyView */
/** @typedef {import('../../src/wire/tasks.js').AttemptView} AttemptView */
/** @typedef {import('../../src/wire/tasks.js').EventView} EventView */

/**
 * The page's header: the task's key, status, type and facts.
 * @param {HTMLElement} head
 * @param {TaskView} t
 */
export function taskHead(head, t) {
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
}

/** @param {TaskView} t */
function specSection(t) {
  const spec = /** @type {Partial<TaskBodyView>} */ (t.spec ?? {});
  return section('Spec',
    h('dl', { class: 'spec' },
      h('dt', null, 'Prompt'), h('dd', null, spec.prompt ? h('pre', { class: 'prompt' }, spec.prompt) : h('span', { class: 'muted' }, 'none')),
      h('dt', null, 'Input'), h('dd', null, spec.input && Object.keys(spec.input).length ? pre(spec.input) : h('span', { class: 'muted' }, 'none')),
      h('dt', null, 'Models'), h('dd', null, chips(spec.models)),
      spec.fallbackModels?.length ? [h('dt', null, 'Fallback models'), h('dd', null, chips(spec.fallbackModels))] : null,
      h('dt', null, 'Required capabilities'), h('dd', null, chips(t.requiredCapabilities)),
      spec.context?.length ? [h('dt', null, 'Context'), h('dd', null, chips(spec.context.map((c) => (typeof c === 'string' ? c : JSON.stringify(c)))))] : null,
      t.outputSpec ? [h('dt', null, 'Output spec'), h('dd', null, pre(t.outputSpec))] : null));
}

/** @param {AttemptView[]} attempts */
function attemptsSection(attempts) {
  return section('Attempts', attempts.length ? table(['#', 'Fence', 'Agent', 'Outcome', 'Error class', 'Error', 'Started', 'Duration', 'Cost'],
    attempts.map((a) => h('tr', { 'data-attempt': a.attempt },
      h('td', { class: 'num' }, String(a.attempt)), h('td', { class: 'num' }, String(a.fence)), h('td', null, a.agentId ?? ''),
      h('td', null, h('span', { class: `outcome ${a.outcome}` }, a.outcome)), h('td', null, a.errorClass ?? ''),
      h('td', { class: 'small clip' }, a.errorMessage ?? ''), h('td', null, when(a.startedAt)),
      h('td', { class: 'num' }, duration(a.durationMs)), h('td', { class: 'num' }, usd(a.costUsd)))),
    { id: 'attempts' }) : empty('No attempts yet.'));
}

/** @param {EventView[]} events */
function eventsSection(events) {
  return section('Events', events.length ? h('ol', { class: 'events' }, events.map((e) => h('li', null,
    when(e.at), ' ', h('strong', null, e.type), e.agentId ? h('span', { class: 'muted' }, ` by ${e.agentId}`) : null,
    e.data && Object.keys(/** @type {object} */ (e.data)).length ? h('code', { class: 'small' }, ` ${JSON.stringify(e.data)}`) : null))) : empty('No events.'));
}

/**
 * The page's body, the streams, log and durable-steps panels in their places among the sections.
 * @param {HTMLElement} content
 * @param {TaskShowAnswer} answer
 * @param {{ streams: HTMLElement, log: HTMLElement, steps: HTMLElement }} panels the same elements each time, so what
 *   they hold (a stream's text, the log's polling) survives
 */
export function taskContent(content, { task: t, inputs, attempts, events }, panels) {
  const verdicts = verdictRows(attempts);
  fill(content,
    specSection(t),
    section('Resolved inputs', inputs && Object.keys(inputs).length ? pre(inputs, { id: 'task-inputs' }) : empty('No upstream context.')),
    section('Output', t.output !== null && t.output !== undefined ? pre(t.output, { id: 'task-output' }) : empty('No output yet.')),
    panels.streams,
    panels.log,
    section('Validation verdicts', verdicts.length
      ? table(['Attempt', 'Step', 'Kind', 'Verdict', 'Score', 'Reasons'], verdicts, { class: 'verdicts' })
      : empty('No validation verdicts.')),
    attemptsSection(attempts),
    panels.steps,
    eventsSection(events));
}
