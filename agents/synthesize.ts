import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { defineAgent, TaskError } from '../src/index.js';

interface SynthesizeInput {
  /** Report title. Default the task's title. */
  title?: string;
  /** Write the report to `<outputDir>/<dag id>-<task key>.md` (only for tasks from a DAG file or template). Default: only return it. */
  outputDir?: string;
}

/**
 * Merges upstream outputs (the task's context refs) and any subtask outputs into
 * one Markdown report, offline: arrays of records become tables, records become
 * definition lists, text stays text. Writes it to a file when asked.
 */
export default defineAgent({
  name: 'synthesize',
  capabilities: ['synthesize', 'markdown'],
  maxConcurrent: 2,
  async run(task, ctx) {
    const input = task.spec.input as SynthesizeInput;
    const sources = { ...ctx.inputs, ...ctx.children };
    if (Object.keys(sources).length === 0) {
      throw new TaskError('bad_input', 'nothing to synthesize: give the task context refs to upstream tasks', { retryable: false });
    }
    const title = input.title ?? task.title ?? task.key;
    const sections = Object.entries(sources).map(([name, value]) => `## ${name}\n\n${markdownOf(value)}`);
    const markdown = `# ${title}\n\n${task.spec.prompt ? `${task.spec.prompt}\n\n` : ''}${sections.join('\n\n')}\n`;
    let file: string | undefined;
    if (input.outputDir) {
      // A path says where the server's machine is written to: only a DAG author may give one, never an agent's subtask.
      if (task.origin !== 'dag' && task.origin !== 'template') {
        throw new TaskError('untrusted_spec', `task ${task.key} was written by an agent (origin ${task.origin}): input.outputDir is honoured only from DAG files and their templates`, { retryable: false });
      }
      mkdirSync(input.outputDir, { recursive: true });
      file = path.resolve(input.outputDir, `${task.dagId}-${task.key.replace(/[^a-z0-9_-]/gi, '_')}.md`);
      writeFileSync(file, markdown);
    }
    return { type: 'markdown', title, path: file ?? null, markdown };
  },
});

/** Markdown for any JSON value, readable rather than exhaustive. */
export function markdownOf(value: unknown, depth = 0): string {
  if (value === null || value === undefined) return '_(nothing)_';
  if (typeof value === 'string') return value;
  if (typeof value !== 'object') return String(value);
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every(isFlatRecord)) return tableOf(value as Array<Record<string, unknown>>);
    return value.map((v) => `- ${inline(v, depth)}`).join('\n');
  }
  const record = value as Record<string, unknown>;
  if (typeof record.markdown === 'string') return record.markdown;
  // Plain fields as one list first, then each nested value under its own heading.
  const entries = Object.entries(record);
  const nested = ([, v]: [string, unknown]) => v !== null && typeof v === 'object' && depth < 2;
  const plain = entries.filter((e) => !nested(e)).map(([k, v]) => `- **${k}**: ${inline(v, depth)}`).join('\n');
  const blocks = entries.filter(nested).map(([k, v]) => `**${k}**\n\n${markdownOf(v, depth + 1)}`);
  return [plain, ...blocks].filter(Boolean).join('\n\n');
}

function isFlatRecord(v: unknown): boolean {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((x) => x === null || typeof x !== 'object');
}

function tableOf(rows: Array<Record<string, unknown>>): string {
  // jsonb does not keep key order: text columns (names, paths) first reads best.
  const all = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const textual = (c: string) => rows.some((r) => typeof r[c] === 'string');
  const cols = [...all.filter(textual), ...all.filter((c) => !textual(c))];
  const cell = (v: unknown) => (v === undefined || v === null ? '' : String(v).replace(/\|/g, '\\|').replace(/\n/g, ' '));
  return [
    `| ${cols.join(' | ')} |`,
    `| ${cols.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${cols.map((c) => cell(r[c])).join(' | ')} |`),
  ].join('\n');
}

function inline(v: unknown, depth: number): string {
  if (v === null || typeof v !== 'object') return String(v);
  return depth < 2 ? JSON.stringify(v) : '…';
}
