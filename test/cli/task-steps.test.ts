import { describe, expect, it } from 'vitest';
import { cliWith } from '../helpers/cli.js';
import { testDatabase } from '../helpers/db.js';
import { agentCreate, dagCreate, leaseExpire } from '../helpers/factories.js';
import { taskClaim } from '../../src/engine/attempt/claim.js';
import { taskComplete } from '../../src/engine/attempt/complete.js';
import { stepRecord, stepReplay } from '../../src/engine/attempt/steps.js';
import { reaperCreate } from '../../src/maintenance/reaper.js';

// dagent task steps and task show, as an operator runs them (the compiled CLI): what each attempt recorded, what a
// later attempt replayed instead of paying again.
const database = await testDatabase();
const { db } = database;
const cli = cliWith({ ...process.env, DATABASE_URL: database.url });

describe('dagent task steps', () => {
  it('lists the steps recorded and replayed, in a table and as JSON; task show says what was replayed rather than paid', async () => {
    await agentCreate(db, 'a1', ['steps']);
    await dagCreate(db, 'name: s\ndefaults: { max_attempts: 3, retry: { strategy: immediate } }\ntasks:\n  t: { type: t, spec: { constraints: { capabilities: [steps] } } }\n');
    const [first] = await taskClaim(db, 'a1', { start: true });
    const ref = { taskId: first!.id, fence: first!.fence };
    await stepRecord(db, { ...ref, name: 'search', result: { hits: 3 }, durationMs: 1200, costUsd: 0.25, tokensIn: 900, tokensOut: 40 });
    await stepRecord(db, { ...ref, name: 'draft', result: 'text', scope: 'attempt', costUsd: 0.5 });

    const empty = await cli('task', 'steps', first!.id);
    expect(empty.stdout).toMatch(/^\s*search\s+task\s+1\s+\d{4}-\d\d-\d\dT\S+Z\s+10 B\s+1200 ms\s+\$0\.2500\s+900\/40\s*$/m);
    expect(empty.stdout).toMatch(/^\s*draft\s+attempt\s+1\s/m);
    expect(empty.stdout).not.toMatch(/replayed/);

    await leaseExpire(db, first!.id);
    expect(await reaperCreate({ db }).runOnce()).toBe(1);
    const [second] = await taskClaim(db, 'a1', { start: true });
    expect((await stepReplay(db, { taskId: second!.id, fence: second!.fence }, 'search'))?.result).toEqual({ hits: 3 });
    await taskComplete(db, { taskId: second!.id, fence: second!.fence, output: { ok: true }, costUsd: 0.1 });

    const human = await cli('task', 'steps', first!.id);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/replayed \(1, \$0\.2500 not paid again\):/);
    expect(human.stdout).toMatch(new RegExp(String.raw`^\s*search\s+${second!.attempt}\s+\d{4}-\d\d-\d\dT\S+Z\s+\$0\.2500\s*$`, 'm'));
    const json = (await cli('task', 'steps', first!.id, '--json')).json();
    expect(json.steps.map((s: { name: string; scope: string; attempt: number }) => [s.name, s.scope, s.attempt])).toEqual([['search', 'task', 1], ['draft', 'attempt', 1]]);
    expect(json.steps[0]).not.toHaveProperty('result');
    expect(json.replays).toEqual([{ name: 'search', fence: second!.fence, attempt: second!.attempt, recordedFence: first!.fence, costUsd: 0.25, replayedAt: expect.stringMatching(/Z$/) }]);

    const shown = await cli('task', 'show', first!.id);
    expect(shown.stdout).toMatch(/cost \$0\.\d+ \(and \$0\.2500 of durable steps replayed, not paid again\)/);
    expect((await cli('task', 'show', first!.id, '--json')).json().attempts.map((a: { attempt: number; replayedCostUsd: number }) => [a.attempt, a.replayedCostUsd]))
      .toEqual([[first!.attempt, 0], [second!.attempt, 0.25]]);

    const unknown = await cli('task', 'steps', 'no-such-task');
    expect([unknown.code, unknown.stderr]).toEqual([4, expect.stringMatching(/task no-such-task not found/)]);
  });
});
