import { readdirSync } from 'node:fs';
import path from 'node:path';
import { defineAgent, TaskError } from '../src/index.js';

/** Folders that are not the project's own content. */
const SKIP = new Set(['node_modules', 'dist', 'coverage']);

/**
 * The root task of the repository audit: one subtask per top-level folder, from
 * the DAG's folder-audit template (the DAG file holds the shell command; this
 * agent only names the folder), then a resumable wait. On its second run the
 * subtasks are done and spawn (same keys) hands back their outputs.
 */
export default defineAgent({
  name: 'repo-audit',
  capabilities: ['repo-audit'],
  async run(task, ctx) {
    if (task.origin !== 'dag' && task.origin !== 'template') {
      throw new TaskError('untrusted_spec', `task ${task.key} was written by an agent (origin ${task.origin}): the folder to audit comes only from DAG files and their templates`, { retryable: false });
    }
    const root = path.resolve(String(task.spec.input.root ?? '.'));
    let folders: string[];
    try {
      folders = readdirSync(root, { withFileTypes: true })
        .filter((d) => d.isDirectory() && !d.name.startsWith('.') && !SKIP.has(d.name))
        .map((d) => d.name)
        .sort();
    } catch (e) {
      throw new TaskError('bad_input', `cannot read ${root}: ${(e as Error).message}`, { retryable: false });
    }
    ctx.log.info({ root, folders: folders.length }, 'auditing folders');
    if (folders.length === 0) return { root, folders: [] };
    const keys = folders.map((f, i, all) => {
      const k = keyOf(f);
      return all.findIndex((g) => keyOf(g) === k) === i ? k : `${k}-${i}`;
    });
    const children = await ctx.spawn(folders.map((f, i) => ({
      key: keys[i]!,
      template: 'folder-audit',
      title: `Audit ${f}/`,
      spec: { input: { dir: f } },
    })), { wait: true });
    return {
      root,
      folders: children.map((c, i) => ({ folder: `${folders[i]}/`, ...countsOf((c.output as { stdout?: string } | undefined)?.stdout ?? '') })),
    };
  },
});

/** A task key for a folder name: lowercase, starting with a letter. */
function keyOf(folder: string): string {
  return `dir-${folder.toLowerCase().replace(/[^a-z0-9_-]/g, '-')}`.slice(0, 56); // room for a -N suffix within 64
}

function countsOf(stdout: string): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const line of stdout.split('\n')) {
    const m = /^(\w+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = /^\d+$/.test(m[2]!) ? Number(m[2]) : m[2]!;
  }
  return out;
}
