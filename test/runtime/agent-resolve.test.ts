import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, taskStatusByKey } from '../helpers/factories.js';
import { agentProcesses } from '../helpers/agent-process.js';
import { eventually } from '../helpers/wait.js';

// An agent in the checkout imports dagent by its source path. Run by the compiled CLI, that import is the CLI's own
// bundled API (dist/cli/api.js): the agent shares the CLI's modules (its defineAgent, TaskError, …) and the
// TypeScript loader compiles the agent's file, not dagent's whole source tree (about 1 s of CPU less per process).
const database = await testDatabase();
const spawnAgent = agentProcesses(database.url);

describe('an agent module run by the compiled CLI', () => {
  it("resolves its import of dagent's sources to the CLI bundle's API, and works a task", async () => {
    const agent = await spawnAgent('test/fixtures/agents/resolves.ts', 'resolver');
    expect(agent.output()).toContain(`dagent sources resolved to ${pathToFileURL(path.resolve('dist/cli/api.js')).href}\n`);
    const dagId = await dagCreate(database.db, 'name: resolve\ntasks:\n  one: { type: t, spec: { constraints: { capabilities: [resolves] } } }\n');
    await eventually('the task completed by the agent', async () => (await taskStatusByKey(database.db, dagId)).one === 'completed');
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
  });
});
