// @ts-check
// The DAG's timeline: a Gantt chart of its tasks' attempts and their durable steps (GET /api/dags/:id/timeline),
// drawn as SVG from text and numbers only (no markup from the data: step names are the agent's text), and its cost
// per model.
import { h, table, usd, duration, empty } from './dom.js';

/** @typedef {import('../src/wire/dags.js').DagTimelineAnswer} DagTimelineAnswer */
/** @typedef {import('../src/wire/dags.js').TimelineSegmentView['kind']} SegmentKind */
/** @typedef {import('../src/wire/dags.js').TimelineTaskView} TimelineTaskView */

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Sizes in SVG user units: the label column, the chart, one row per task (its bars, and under them its steps'). */
export const TIMELINE_SIZES = { labelW: 190, chartW: 860, rowH: 18, barH: 10, stepH: 4, axisH: 22 };
/** Rows drawn before "Show all": a 3,000-task DAG's chart would be 54,000 units tall. */
export const TIMELINE_ROWS_SHOWN = 200;

/** @type {Record<SegmentKind, string>} */
export const SEGMENT_LABELS = { queued: 'queued', running: 'running', validating: 'validating', retry_wait: 'retry wait', waiting: 'waiting for subtasks' };

/**
 * An SVG element with attributes and children (text as text nodes).
 * @param {string} tag
 * @param {Record<string, unknown> | null} attrs
 * @param {...(Node | string | null | undefined)} children
 */
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs ?? {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

/**
 * Round tick steps for a span of `ms`, about six ticks.
 * @param {number} ms
 */
function tickStep(ms) {
  const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5, 216e5, 432e5, 864e5];
  return steps.find((st) => ms / st <= 7) ?? 864e5 * Math.ceil(ms / (864e5 * 7));
}

/**
 * A task's durable steps, under its attempts' bars: a recorded step as a thin bar from when its work began to its
 * recording; a replayed one as an outlined mark where its attempt replayed it, which says what was not paid again.
 * @param {TimelineTaskView} task
 * @param {number} y the row's top
 * @param {(iso: string) => number} x
 * @param {typeof TIMELINE_SIZES} sizes
 */
function stepMarks(task, y, x, { barH, stepH }) {
  const lane = y + barH + 2;
  const recorded = task.steps.map((st) => {
    const x1 = x(st.from);
    const what = `${task.key}: step ${st.name} (${st.scope}), attempt ${st.attempt}, ${duration(Date.parse(st.to) - Date.parse(st.from))}, ${usd(st.costUsd)}`;
    return s('rect', { class: 'step step-recorded', x: x1, y: lane, width: Math.max(1, x(st.to) - x1), height: stepH, 'data-step': st.name, 'data-fence': st.fence }, s('title', null, what));
  });
  const replayed = task.replays.map((r) => s('rect', {
    class: 'step step-replayed', x: x(r.replayedAt) - 1.5, y: y + 1, width: 3, height: barH + stepH + 1, 'data-step': r.name, 'data-fence': r.fence,
  }, s('title', null, `${task.key}: step ${r.name}, attempt ${r.attempt}, replayed: ${usd(r.costUsd)} not paid again`)));
  return [...recorded, ...replayed];
}

/**
 * The chart: one row per task (the first `rows` of them), time across, each segment a bar coloured by its kind
 * (running bars by how the attempt ended), its durable steps under them, critical-path rows marked.
 * @param {Pick<DagTimelineAnswer, 'from' | 'to' | 'tasks'>} tl
 * @param {number} [rows]
 * @param {typeof TIMELINE_SIZES} [sizes]
 */
export function timelineSvg(tl, rows = TIMELINE_ROWS_SHOWN, sizes = TIMELINE_SIZES) {
  const { labelW, chartW, rowH, barH, axisH } = sizes;
  const t0 = Date.parse(tl.from);
  const span = Math.max(1, Date.parse(tl.to) - t0);
  /** @param {string} iso */
  const x = (iso) => labelW + ((Date.parse(iso) - t0) / span) * chartW;
  const shown = tl.tasks.slice(0, rows);
  const height = axisH + shown.length * rowH + 4;
  const svg = s('svg', { class: 'timeline', width: labelW + chartW + 10, height, viewBox: `0 0 ${labelW + chartW + 10} ${height}`, role: 'img', 'aria-label': 'Timeline of the DAG\'s attempts' });
  const step = tickStep(span);
  for (let t = 0; t <= span; t += step) {
    const tx = labelW + (t / span) * chartW;
    svg.append(s('line', { class: 'tick', x1: tx, x2: tx, y1: axisH - 4, y2: height }), s('text', { class: 'tick-label', x: tx + 2, y: 12 }, `+${duration(t)}`));
  }
  shown.forEach((task, i) => {
    const y = axisH + i * rowH;
    const row = s('g', { class: `row${task.critical ? ' critical' : ''}`, 'data-key': task.key });
    row.append(s('text', { class: 'row-label', x: task.critical ? 10 : 4, y: y + barH + 1 }, task.key.length > 28 ? `${task.key.slice(0, 27)}…` : task.key));
    if (task.critical) row.append(s('rect', { class: 'critical-mark', x: 0, y, width: 4, height: barH + 2 }));
    for (const seg of task.segments) {
      const x1 = x(seg.from);
      const w = Math.max(1, x(seg.to) - x1);
      const outcome = seg.kind === 'running' && seg.outcome ? ` outcome-${seg.outcome}` : '';
      const ms = Date.parse(seg.to) - Date.parse(seg.from);
      const what = `${task.key}: ${SEGMENT_LABELS[seg.kind] ?? seg.kind}${seg.attempt ? `, attempt ${seg.attempt}` : ''}${seg.outcome && seg.kind === 'running' ? ` (${seg.outcome})` : ''}${seg.model ? `, ${seg.model}` : ''}, ${duration(ms)}`;
      row.append(s('rect', { class: `seg seg-${seg.kind}${outcome}`, x: x1, y: y + 1, width: w, height: barH, 'data-kind': seg.kind }, s('title', null, what)));
    }
    row.append(...stepMarks(task, y, x, sizes));
    svg.append(row);
  });
  return svg;
}

/** @param {boolean} [withSteps] the chart draws durable steps */
export function timelineLegend(withSteps = false) {
  return h('div', { class: 'legend' },
    Object.entries(SEGMENT_LABELS).map(([k, label]) => h('span', { class: 'legend-item' }, h('span', { class: `swatch seg-${k}` }), label)),
    h('span', { class: 'legend-item' }, h('span', { class: 'swatch outcome-failed' }), 'failed attempt'),
    withSteps ? [
      h('span', { class: 'legend-item' }, h('span', { class: 'swatch step-recorded' }), 'durable step'),
      h('span', { class: 'legend-item' }, h('span', { class: 'swatch step-replayed' }), 'step replayed (not paid again)'),
    ] : null,
    h('span', { class: 'legend-item' }, h('span', { class: 'swatch critical' }), 'critical path'));
}

/**
 * The chart with its legend and, past TIMELINE_ROWS_SHOWN tasks, a button that draws them all.
 * @param {DagTimelineAnswer} tl
 */
export function timelineView(tl) {
  if (tl.tasks.every((t) => t.segments.length === 0)) return empty('Nothing has run yet.');
  const box = h('div', { class: 'graph-scroll timeline-box' }, timelineSvg(tl));
  const more = tl.tasks.length > TIMELINE_ROWS_SHOWN
    ? h('button', { type: 'button', 'data-action': 'timeline-all' }, `Show all ${tl.tasks.length} tasks`)
    : null;
  more?.addEventListener('click', () => {
    box.replaceChildren(timelineSvg(tl, tl.tasks.length));
    more.remove();
  });
  const path = tl.criticalPath.length ? h('p', { class: 'muted small' }, 'Critical path: ', tl.criticalPath.join(' → ')) : null;
  return h('div', null, timelineLegend(tl.tasks.some((t) => t.steps.length > 0 || t.replays.length > 0)), path, box, more);
}

/**
 * What the DAG has cost per model, and its most expensive tasks.
 * @param {DagTimelineAnswer} tl
 */
export function costView(tl) {
  const byModel = tl.costByModel.length
    ? table(['Model', 'Cost', 'Tokens in', 'Tokens out', 'Attempts'], tl.costByModel.map((m) => h('tr', { 'data-model': m.model ?? '' },
      h('td', null, m.model ?? '(none)'), h('td', { class: 'num' }, usd(m.costUsd)), h('td', { class: 'num' }, String(m.tokensIn)),
      h('td', { class: 'num' }, String(m.tokensOut)), h('td', { class: 'num' }, String(m.attempts)))), { class: 'cost-models' })
    : empty('No attempt has ended yet.');
  const top = [...tl.tasks].filter((t) => t.costUsd > 0).sort((a, b) => b.costUsd - a.costUsd).slice(0, 10);
  const byTask = top.length
    ? table(['Task', 'Cost'], top.map((t) => h('tr', { 'data-key': t.key }, h('td', null, t.key), h('td', { class: 'num' }, usd(t.costUsd)))), { class: 'cost-tasks' })
    : null;
  return h('div', { class: 'cost-grid' }, byModel, byTask);
}
