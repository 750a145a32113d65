import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// In a checkout, `npm install` (the prepare script: scripts/prepare.mjs, scripts/checkout-bin.mjs) links node_modules/.bin/dagent to
// bin/dagent.js. Without the link, `npx dagent` copied the folder into npx's cache as a package and built it
// there on the first call (30-50 s; an MCP client started with it timed out).
const run = promisify(execFile);
const ROOT = path.resolve('.');
const emptyCache = mkdtempSync(path.join(os.tmpdir(), 'dagent-npx-cache-'));
afterAll(() => rmSync(emptyCache, { recursive: true, force: true }));

describe('the dagent command in a checkout', () => {
  it('node_modules/.bin/dagent is bin/dagent.js; npx runs the built CLI without building it again', async () => {
    const link = path.join(ROOT, 'node_modules/.bin/dagent');
    expect(readlinkSync(link)).toBe('../../bin/dagent.js');
    expect(realpathSync(link)).toBe(path.join(ROOT, 'bin/dagent.js'));
    const version = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string;
    expect((await run(link, ['--version'], { cwd: ROOT })).stdout.trim()).toBe(version);
    // npx, with a cache of its own that has never seen this checkout: it installs the folder there (linked) and
    // runs its prepare script, which leaves the built dist/ as it is (scripts/prepare.mjs).
    const built = statSync(path.join(ROOT, 'dist/cli/dagent.js')).mtimeMs;
    expect((await run('npx', ['--cache', emptyCache, 'dagent', '--version'], { cwd: ROOT })).stdout.trim()).toBe(version);
    expect(statSync(path.join(ROOT, 'dist/cli/dagent.js')).mtimeMs).toBe(built);
  });

  it('the link is made again by the script when missing or pointing elsewhere, and left alone inside node_modules', async () => {
    const copy = mkdtempSync(path.join(os.tmpdir(), 'dagent-checkout-'));
    try {
      mkdirSync(path.join(copy, 'scripts'));
      cpSync(path.join(ROOT, 'scripts/checkout-bin.mjs'), path.join(copy, 'scripts/checkout-bin.mjs'));
      mkdirSync(path.join(copy, 'node_modules/.bin'), { recursive: true });
      symlinkSync('../elsewhere/cli.js', path.join(copy, 'node_modules/.bin/dagent'));
      await run(process.execPath, [path.join(copy, 'scripts/checkout-bin.mjs')]);
      expect(readlinkSync(path.join(copy, 'node_modules/.bin/dagent'))).toBe('../../bin/dagent.js');
      // Installed as a dependency (the package inside another project's node_modules): nothing is linked.
      const nested = path.join(copy, 'node_modules/dagent');
      mkdirSync(path.join(nested, 'scripts'), { recursive: true });
      cpSync(path.join(ROOT, 'scripts/checkout-bin.mjs'), path.join(nested, 'scripts/checkout-bin.mjs'));
      writeFileSync(path.join(nested, 'package.json'), '{}');
      await run(process.execPath, [path.join(nested, 'scripts/checkout-bin.mjs')]);
      expect(() => readlinkSync(path.join(nested, 'node_modules/.bin/dagent'))).toThrow();
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
