import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';

const run = promisify(execFile);
const database = await testDatabase();

// docs/api.md promises that each example compiles against the public API, and that the first runs.
const DIR = path.resolve('test/.api-examples');
const blocks = [...readFileSync('docs/api.md', 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);

function examplesWrite(): string[] {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  const files = blocks.map((code, i) => {
    const file = path.join(DIR, `example-${i + 1}.ts`);
    // Each block is a module of its own; 'dagent' is this checkout's public entry point.
    writeFileSync(file, `${code.replaceAll("from 'dagent'", "from '../../src/index.js'")}\nexport {};\n`);
    return file;
  });
  writeFileSync(path.join(DIR, 'tsconfig.json'), JSON.stringify({
    extends: '../../tsconfig.json', compilerOptions: { noEmit: true, rootDir: '../..' }, include: ['*.ts'],
  }));
  return files;
}

describe('docs/api.md', () => {
  it('has an example for every group of the public API, and each one type-checks against src/index.ts', async () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    const index = readFileSync('src/index.ts', 'utf8');
    const exported = [...index.matchAll(/export (?:type )?\{([^}]*)\}/g)].flatMap((m) => m[1]!.split(',').map((n) => n.replace(/\btype\b/, '').trim())).filter(Boolean);
    const doc = readFileSync('docs/api.md', 'utf8');
    // Every name src/index.ts exports by name is listed on the page.
    for (const name of exported) expect(doc, name).toContain(`\`${name}\``);
    examplesWrite();
    const tsc = await run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', path.join(DIR, 'tsconfig.json')]).catch((e: { stdout: string }) => e);
    expect(tsc.stdout).toBe('');
  }, 120_000);

  it('the embedding example runs end to end: the DAG completes with the agent\'s outputs', async () => {
    const [first] = examplesWrite();
    const { stdout } = await run(process.execPath, ['--import', 'tsx', first!], {
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_LOG_LEVEL: 'warn' }, timeout: 60_000,
    });
    expect(stdout.trim()).toBe('completed [["hello",{"who":"world"}],["shout",{"who":"WORLD"}]]');
  }, 90_000);
});
