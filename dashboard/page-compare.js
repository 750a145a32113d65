// @ts-check
// Two runs of a DAG side by side (GET /api/dags/:id/compare/:other): a DAG and its rerun with a change (dag rerun
// --model/--set), per task key: each run's output, verdicts, cost, tokens, time and attempts, and the totals. Linked
// from the DAG page of a rerun and of a DAG that has reruns. Outputs are agent text: shown as text (dom.js h), never HTML.
import { api } from './api.js';
import { h, fill, main, link, hrefDag, hrefTask, badge, table, section, empty, usd, duration, pageError } from './dom.js';
import { rerunSummary } from './dag/header.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/compare.js').DagCompareAnswer} DagCompareAnswer */
/** @typedef {DagCompareAnswer['tasks'][number]['a']} Side */
/** @typedef {DagCompareAnswer['a']} Run */

/**
 * @param {PageContext} ctx
 * @param {string} a
 * @param {string} b
 */
export function pageCompare(ctx, a, b) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  fill(main, h('div', { class: 'page-head' }, h('h1', null, 'Compare runs')), body);
  const load = ctx.refetcher({
    load: () => /** @type {Promise<DagCompareAnswer>} */ (api('GET', `/api/dags/${encodeURIComponent(a)}/compare/${encodeURIComponent(b)}`)),
    apply: (c) => fill(body, runsView(c), tasksView(c)),
    fail: (err) => fill(body, pageError(err)),
  });
  void load.now();
  // Either run still going: its figures change as its tasks finish.
  ctx.onGlobal((e) => { if (e.type.startsWith('dag.') || e.type.startsWith('task.')) load.soon(); });
}

/** @param {DagCompareAnswer} c */
function runsView(c) {
  /** @param {string} side @param {Run} r */
  const row = (side, r) => {
    const t = r.totals;
    const unknown = t.costUnknownTasks ? h('span', { class: 'cost-unknown', title: 'a usage report had no price for its model' }, ` + cost unknown (${t.costUnknownTasks} task(s))`) : null;
    return h('tr', { 'data-side': side, 'data-dag-id': r.id },
      h('td', null, h('strong', null, side), ' ', link(hrefDag(r.id), r.name), h('div', { class: 'muted small mono' }, r.id),
        r.rerunOf ? h('div', { class: 'muted small' }, rerunSummary(r.rerunOf, r.rerunChange)) : null),
      h('td', null, badge(r.status)),
      h('td', { class: 'num' }, usd(t.costUsd), unknown),
      h('td', { class: 'num' }, (t.tokensIn + t.tokensOut).toLocaleString()),
      h('td', { class: 'num' }, duration(t.durationMs)),
      h('td', { class: 'num' }, String(t.attempts)),
      h('td', { class: 'num' }, `${t.completed}/${t.tasks}${t.reused ? ` (${t.reused} reused)` : ''}`),
      h('td', { class: 'num' }, t.verdicts ? `${t.verdictsPassed}/${t.verdicts}` : '—'));
  };
  return section('Runs',
    table(['Run', 'Status', 'Cost', 'Tokens', 'Time', 'Attempts', 'Completed', 'Verdicts passed'], [row('A', c.a), row('B', c.b)], { id: 'compare-runs' }),
    h('p', { class: 'muted', id: 'compare-summary' }, `${c.outputsDiffering} of ${c.tasks.filter((t) => t.a?.outputText != null && t.b?.outputText != null).length} outputs differ.`));
}

/**
 * One run's task: its output as text, and what it took.
 * @param {Side} s
 * @param {string} side
 * @param {boolean} same
 */
function sideCell(s, side, same) {
  if (!s) return h('td', { class: 'muted', 'data-side': side }, 'No such task in this run.');
  const figures = [
    s.reusedFrom ? h('span', { class: 'chip', title: `carried over from ${s.reusedFrom}: it ran nothing and cost nothing` }, 'reused') : null,
    s.model ? h('span', { class: 'mono' }, s.model) : null,
    s.costUsd === null ? h('span', { class: 'cost-unknown' }, 'cost unknown') : usd(s.costUsd),
    `${(s.tokensIn + s.tokensOut).toLocaleString()} tokens`,
    duration(s.durationMs),
    `${s.attempts} attempt(s)`,
  ].filter(Boolean).flatMap((x, i) => (i ? [' · ', x] : [x]));
  const output = s.outputText === null ? h('p', { class: 'muted' }, `No output (${s.status}).`)
    : same ? h('p', { class: 'muted' }, 'The same output as A.')
      : h('pre', { class: 'json compare-output' }, s.outputText, s.outputTruncated ? h('span', { class: 'muted' }, `\n… (${s.outputLength.toLocaleString()} characters in all)`) : null);
  return h('td', { 'data-side': side },
    h('div', { class: 'small' }, link(hrefTask(s.taskId), badge(s.status)), ' ', figures),
    s.verdicts.length ? h('div', { class: 'small' }, s.verdicts.map((v) => h('span', { class: `verdict ${v.pass ? 'pass' : 'fail'}` },
      `${v.kind}${v.score != null ? ` ${Number(v.score).toFixed(2)}` : ''} ${v.pass ? 'pass' : 'fail'}`))) : null,
    output);
}

/** @param {DagCompareAnswer} c */
function tasksView(c) {
  return section('Tasks',
    c.tasks.length
      ? table(['Task', 'A', 'B'], c.tasks.map((t) => h('tr', { 'data-key': t.key, class: t.sameOutput ? 'same' : '' },
        h('td', { class: 'mono' }, t.key), sideCell(t.a, 'a', false), sideCell(t.b, 'b', t.sameOutput))), { id: 'compare-tasks', class: 'compare' })
      : empty('Neither run has tasks.'));
}
