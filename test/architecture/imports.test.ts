import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

// The layers and the rules are in .dependency-cruiser.cjs; docs/architecture.md draws them.
describe('imports', () => {
  it('have no cycle and never reach up a layer (dependency-cruiser over src/ and agents/)', async () => {
    const r = await run(process.execPath, ['node_modules/dependency-cruiser/bin/dependency-cruise.mjs', 'src', 'agents', '--config', '.dependency-cruiser.cjs', '--output-type', 'err-long'])
      .catch((e: { stdout: string; stderr: string; code: number }) => e);
    // On failure the output names each rule broken, with the importing and the imported file.
    expect(r.stdout + r.stderr).toMatch(/no dependency violations found/);
    expect('code' in r ? r.code : 0).toBe(0);
  }, 60_000);
});
