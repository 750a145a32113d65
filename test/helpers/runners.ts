import { afterEach } from 'vitest';
import { pino } from 'pino';
import type { Database } from '../../src/db/handle.js';
import { AgentRunner, type AgentRunnerOptions } from '../../src/runtime/agent-runner.js';
import type { AgentDefinition } from '../../src/runtime/define-agent.js';

/**
 * In-process agent runners for a test file, silent, each stopped (grace 0)
 * after every test. `runner` creates one; `run` also starts it.
 */
export function agentRunners(database: Database, defaults: Partial<AgentRunnerOptions> = {}) {
  const runners: AgentRunner[] = [];
  afterEach(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop({ graceMs: 0 })));
  });
  const runner = (def: AgentDefinition, opts: Partial<AgentRunnerOptions> = {}): AgentRunner => {
    const r = new AgentRunner(def, { database, log: pino({ level: 'silent' }), ...defaults, ...opts });
    runners.push(r);
    return r;
  };
  const run = async (def: AgentDefinition, opts: Partial<AgentRunnerOptions> = {}): Promise<AgentRunner> => {
    const r = runner(def, opts);
    await r.start();
    return r;
  };
  return { runner, run };
}
