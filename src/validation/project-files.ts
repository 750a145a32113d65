import { constants } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import path from 'node:path';
import { LIMITS } from '../config/index.js';

/**
 * Paths in a DAG (a schema file, a test step's working directory) name files of the
 * project: they resolve under the DAG file's directory (for a DAG posted over HTTP,
 * the server's working directory) or under an operator's DAGENT_FILE_ROOTS, after
 * symlinks are followed. A file is read only if it is a regular file (never a FIFO,
 * a device or /dev/zero), within LIMITS.schemaFileBytes, off the event loop and within
 * LIMITS.fileReadTimeoutMs. No error quotes what the file holds.
 */
export interface ProjectRoots {
  /** The DAG file's directory: relative paths start here. */
  baseDir: string;
  /** More directories an operator allows (DAGENT_FILE_ROOTS). */
  roots?: readonly string[];
}

/**
 * Why `written` may not be used: one answer for every path outside the project, whether or not something is there,
 * naming no directory of the server (a DAG posted over HTTP learnt which files existed outside, and where the
 * server runs, from the difference).
 */
export function outsideTheProject(written: string, where: ProjectRoots): string {
  const roots = where.roots?.length ? ' and the directories DAGENT_FILE_ROOTS allows (default: the working directory)' : ' (an operator may allow more directories with DAGENT_FILE_ROOTS)';
  return `${written} is outside the DAG's directory${roots}`;
}

/** The real path of `written` (relative to baseDir), or why it may not be used. */
export async function projectPathResolve(written: string, where: ProjectRoots): Promise<{ real: string } | { error: string }> {
  const target = path.resolve(where.baseDir, written);
  const roots = [where.baseDir, ...(where.roots ?? [])].map((r) => path.resolve(r));
  const realRoots = await Promise.all(roots.map((r) => realpath(r).catch(() => r)));
  // Outside as written: refused before anything is looked up, so the answer says nothing of what is there.
  if (!within(target, [...roots, ...realRoots])) return { error: outsideTheProject(written, where) };
  let real: string;
  try {
    real = await realpath(target);
  } catch (e) {
    // Nor through a symlink in the project: a path that leaves it on the way gets the same answer.
    if (!within(await realAncestor(target), realRoots)) return { error: outsideTheProject(written, where) };
    const code = (e as NodeJS.ErrnoException).code;
    return { error: code === 'ENOENT' ? `${written} not found${lookedIn(path.dirname(target))}` : `${written} cannot be opened (${code ?? 'error'})` };
  }
  if (!within(real, realRoots)) return { error: outsideTheProject(written, where) };
  return { real };
}

function within(p: string, dirs: readonly string[]): boolean {
  return dirs.some((r) => p === r || p.startsWith(r.endsWith(path.sep) ? r : r + path.sep));
}

/** The nearest directory above `p` that exists, symlinks followed. */
async function realAncestor(p: string): Promise<string> {
  for (let dir = path.dirname(p); ; dir = path.dirname(dir)) {
    try {
      return await realpath(dir);
    } catch {
      if (dir === path.dirname(dir)) return dir;
    }
  }
}

/** ` (looked in dags/templates)`: relative to the working directory (the server's is its project), never absolute. */
function lookedIn(dir: string): string {
  const rel = path.relative(process.cwd(), dir);
  return rel.startsWith('..') || path.isAbsolute(rel) ? '' : ` (looked in ${rel || '.'})`;
}

/** Read a project file as text, or say why not (never quoting its content). */
export async function projectFileRead(written: string, where: ProjectRoots, maxBytes = LIMITS.schemaFileBytes): Promise<{ text: string } | { error: string }> {
  const resolved = await projectPathResolve(written, where);
  if ('error' in resolved) return resolved;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ error: string }>((resolve) => {
    timer = setTimeout(() => resolve({ error: `${written} could not be read within ${LIMITS.fileReadTimeoutMs / 1000} s` }), LIMITS.fileReadTimeoutMs);
  });
  try {
    return await Promise.race([regularFileRead(resolved.real, written, maxBytes), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function regularFileRead(real: string, written: string, maxBytes: number): Promise<{ text: string } | { error: string }> {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then tells what was opened.
  let fh;
  try {
    fh = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (e) {
    return { error: `${written} cannot be opened (${(e as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  try {
    const stat = await fh.stat();
    if (!stat.isFile()) return { error: `${written} is not a regular file` };
    if (stat.size > maxBytes) return { error: `${written} is larger than ${maxBytes} bytes` };
    const buf = Buffer.alloc(maxBytes + 1);
    let size = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, size, buf.length - size, size);
      if (bytesRead === 0) break;
      size += bytesRead;
      // It grew since fstat: still never more than the cap.
      if (size > maxBytes) return { error: `${written} is larger than ${maxBytes} bytes` };
    }
    return { text: buf.subarray(0, size).toString('utf8') };
  } finally {
    await fh.close();
  }
}
