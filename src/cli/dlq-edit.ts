import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import type { TaskBody } from '../dag/spec.js';
import type { TaskRow } from '../db/rows.js';
import type { TaskEditInput } from '../engine/ops/dlq.js';
import { InvalidInputError } from '../errors.js';
import type { Io } from './output.js';

/** What `dlq retry --edit` lets a person change, with the task's values now (field names as in a DAG file). */
function editableOf(task: TaskRow): Record<string, unknown> {
  const body = task.spec as TaskBody;
  return {
    title: task.title ?? '',
    prompt: body.prompt ?? '',
    input: body.input,
    models: body.models,
    fallback_models: body.fallbackModels,
    requires: task.requiredCapabilities,
    priority: task.priority,
    max_attempts: task.maxAttempts,
    max_cost_usd: task.maxCostUsd,
  };
}

/** A YAML or JSON file of the fields to change (`--patch`): only the fields it names change. */
export function editFromPatchFile(file: string): TaskEditInput {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new InvalidInputError(`--patch ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  return editParse(text, `--patch ${file}`);
}

/**
 * `--edit`: the task's editable fields in $VISUAL or $EDITOR (else vi) as YAML; what the person
 * changed becomes the edit. Leaving every field as it was changes nothing and retries nothing.
 */
export function editFromEditor(task: TaskRow, io: Io, deadLetterId: string): TaskEditInput {
  const before = editableOf(task);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dagent-edit-'));
  const file = path.join(dir, `${deadLetterId}.yaml`);
  try {
    writeFileSync(file, `# dagent dlq retry ${deadLetterId} --edit: task ${task.key} (${task.id}).\n`
      + '# Change what the task should do differently, save and quit. Fields left as they are do not change.\n'
      + stringify(before, { lineWidth: 0 }));
    const editor = io.env.VISUAL || io.env.EDITOR || 'vi';
    // Through a shell: $EDITOR may carry arguments (`code --wait`). The file name is ours.
    const r = spawnSync(`${editor} "${file}"`, { stdio: 'inherit', shell: true, env: io.env });
    if (r.error || r.status !== 0) throw new InvalidInputError(`the editor (${editor}) ${r.error ? `could not start: ${r.error.message}` : `exited ${r.status}`}; nothing was retried`);
    const after = editParse(readFileSync(file, 'utf8'), 'the edited file') as Record<string, unknown>;
    const changed = Object.fromEntries(Object.entries(after).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(before[k])));
    if (Object.keys(changed).length === 0) throw new InvalidInputError('the edit changed nothing; nothing was retried (to retry the task as it is, leave out --edit)');
    return changed as TaskEditInput;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function editParse(text: string, where: string): TaskEditInput {
  let value: unknown;
  try {
    value = parse(text);
  } catch (e) {
    throw new InvalidInputError(`${where}: not YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InvalidInputError(`${where}: expected a mapping of the fields to change (title, prompt, input, models, fallback_models, requires, priority, max_attempts, max_cost_usd)`);
  return value as TaskEditInput;
}
