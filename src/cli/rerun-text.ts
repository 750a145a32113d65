import type { RerunChangeRecord } from '../engine/dag/rerun-changed.js';

/**
 * What a rerun with a change was made from and what it changed, on one line (`dagent status`, `dag rerun`, `dag compare`):
 * `rerun of dag_… (model gpt-4o-mini; set draft.prompt): 3 task(s) ran again, 2 reused`.
 */
export function rerunLine(of: string, c: RerunChangeRecord | null): string {
  if (!c) return `rerun of ${of}`;
  const what = [...(c.model ? [`model ${c.model}`] : []), ...c.set.map((x) => `set ${x.task ? `${x.task}.` : ''}${x.field}`)].join('; ');
  return `rerun of ${of} (${what}): ${c.rerunTasks} task(s) re-run, ${c.reusedTasks} reused${c.note ? ` (${c.note})` : ''}`;
}
