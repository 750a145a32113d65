// @ts-check
// A task's log on its page: the lines its agent logged during one attempt (the latest by
// default, or one chosen), appended live while that attempt runs.
import { api, errorText } from './api.js';
import { h, fill, section, empty } from './dom.js';

/** @typedef {import('./live.js').PageContext} PageContext */
/** @typedef {import('../src/wire/tasks.js').TaskLogAnswer} TaskLogAnswer */

/** How often the log of a running attempt is asked for new lines. */
const LIVE_MS = 1_000;

/**
 * The log panel of a task's page, and `refresh` to read it (again).
 * @param {PageContext} ctx
 * @param {string} taskId
 */
export function taskLogPanel(ctx, taskId) {
  const status = h('p', { class: 'muted small', id: 'task-log-status' });
  const picker = h('select', { 'aria-label': 'attempt', id: 'task-log-attempt', hidden: true });
  const lines = h('pre', { class: 'log', id: 'task-log' });
  const el = section('Log', h('div', { class: 'head-row' }, status, picker), lines);
  /** @type {{ fence: number, next: string | number } | undefined} */
  let shown;
  /** @type {number | undefined} an attempt number the person picked, else the latest */
  let chosen;
  let busy = false;

  picker.addEventListener('change', () => {
    chosen = Number(picker.value);
    shown = undefined;
    void refresh();
  });

  async function refresh() {
    if (busy || !ctx.alive) return;
    busy = true;
    try {
      const q = new URLSearchParams();
      if (chosen !== undefined) q.set('attempt', String(chosen));
      if (shown) q.set('after', String(shown.next));
      const r = /** @type {TaskLogAnswer} */ (await api('GET', `/api/tasks/${encodeURIComponent(taskId)}/logs?${q}`));
      if (!ctx.alive) return;
      const a = r.attempt;
      fill(picker, r.attempts.map((x) => h('option', { value: String(x.attempt), selected: a && x.fence === a.fence ? '' : null }, `attempt ${x.attempt}`)));
      picker.hidden = r.attempts.length < 2;
      if (!a) {
        fill(lines, empty('Nothing logged yet.'));
        status.textContent = '';
        return;
      }
      if (!shown || shown.fence !== a.fence) fill(lines);
      for (const l of a.entries) {
        const fields = l.fields && Object.keys(l.fields).length ? ` ${JSON.stringify(l.fields)}` : '';
        lines.append(h('span', { class: `log-line level-${l.level}` }, `${new Date(l.at).toISOString().slice(11, 23)} ${l.level.toUpperCase().padEnd(5)} ${l.message}${fields}\n`));
      }
      shown = { fence: a.fence, next: a.next };
      status.textContent = `Attempt ${a.attempt}${a.running ? ' (running: live)' : ''} · ${a.lines} line(s)${a.dropped ? ` · ${a.dropped} dropped past the attempt's allowance` : ''}`;
      if (a.running) setTimeout(() => void refresh(), LIVE_MS);
    } catch (err) {
      status.textContent = errorText(err);
    } finally {
      busy = false;
    }
  }

  return { el, refresh };
}
