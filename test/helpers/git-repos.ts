import { execFileSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

/** git in `cwd` with an argument list, its output trimmed; as a person at a terminal would run it. */
export function gitIn(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' } }).trim();
}

/**
 * A folder of this test file's own (removed after it), its real path (macOS's /tmp is a symlink): a workspace root,
 * repositories and scripts go in it.
 */
export function scratchDir(prefix = 'dagent-ws-'): string {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), prefix)));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A repository on branch main with one commit: each file of `files` written as given. */
export function repoMake(dir: string, files: Record<string, string> = { 'a.txt': 'base\n', 'src/lib.txt': 'lib\n' }): string {
  execFileSync('git', ['init', '--quiet', '-b', 'main', dir]);
  for (const [name, text] of Object.entries(files)) {
    execFileSync('mkdir', ['-p', path.dirname(path.join(dir, name))]);
    writeFileSync(path.join(dir, name), text);
  }
  gitIn(dir, 'add', '--all');
  gitIn(dir, 'commit', '--quiet', '-m', 'base');
  return dir;
}

/** An executable script (a scripted stand-in for a coding CLI: it edits files in the folder it runs in). */
export function scriptMake(file: string, body: string): string {
  writeFileSync(file, `#!/bin/sh\nset -e\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}
