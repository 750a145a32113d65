import { readdirSync } from 'node:fs';
import path from 'node:path';
import { defineAgent, TaskError } from '../src/index.js';

/** Folders that are not the project's own content. */
const SKIP = new Set(['node_modules', 'dist', 'coverage']);

// Counted by the shell agent, one key=value per line; $DIR comes through the environment, so no quoting games.
const FOLDER_SCRIPT = [
  `printf 'files=%s\\n' "$(find "$DIR" -type f | wc -l)"`,
  `printf 'lines=%s\\n' "$(find "$DIR" -type f -exec cat {} + 2>/dev/null | wc -l)"`,
  `printf 'kib=%s\\n' "$(du -sk "$DIR" | cut -f1)"`,
  `printf 'todos=%s\\n' "$(grep -rIE 'TODO|FIXME|XXX' "$DIR" 2>/dev/null | wc -l)"`,
  `printf 'largest=%s\\n' "$(find "$DIR" -type f -exec wc -c {} + 2>/dev/null | grep -v ' total$' | sort -rn | head -1 | awk '{print $2}')"`,
].join('; ');

/**
 * The root task of the repository audit: one `shell` subtask per top-level
 * folder, spawned at runtime, then a resumable wait. On its second run the
 * subtasks are done and spawn (same keys) hands back their outputs.
 */
export default defineAgent({
  name: 'repo-audit',
  capabilities: ['repo-audit'],
  async run(task, ctx) {
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
      type: 'folder-audit',
      title: `Audit ${f}/`,
      requires: ['shell'],
      spec: { input: { command: FOLDER_SCRIPT, cwd: root, env: { DIR: f }, timeoutSec: 60 } },
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
