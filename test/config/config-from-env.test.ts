import { describe, expect, it } from 'vitest';
import { configFromEnv } from '../../src/config/index.js';

// The environment as configFromEnv reads it: each variable named once (with its Config key), lists split on commas.
describe('configFromEnv', () => {
  it('reads each variable into its setting; an empty one is unset', () => {
    const c = configFromEnv({
      DAGENT_AGENTS: ' agents/a.ts, agents/b.ts:2 ,', DAGENT_FILE_ROOTS: '/srv/x,/srv/y', DAGENT_HTTP_PORT: '8080', DAGENT_MAX_QUEUED: '',
      DAGENT_RETENTION: 'off', DAGENT_AGENT_INSTANCE: 'node-1', DAGENT_LOOP_LEASE_SEC: '30',
    });
    expect(c).toMatchObject({ agents: ['agents/a.ts', 'agents/b.ts:2'], fileRoots: ['/srv/x', '/srv/y'], httpPort: 8080, retentionSec: null, agentInstance: 'node-1', loopLeaseSec: 30 });
    expect(c.maxQueued).toBeUndefined();
  });

  it('a bad value is refused naming its variable', () => {
    expect(() => configFromEnv({ DAGENT_HTTP_PORT: '70000' })).toThrow(/^environment DAGENT_HTTP_PORT: /);
    expect(() => configFromEnv({ DAGENT_AGENTS: 'a.ts:x' })).toThrow(/^environment DAGENT_AGENTS: expected file or file:concurrency/);
    expect(() => configFromEnv({ DAGENT_DB_POOL: '1' })).toThrow(/^environment DAGENT_DB_POOL: /);
    expect(() => configFromEnv({ DAGENT_LOG_LEVEL: 'loud' })).toThrow(/^environment DAGENT_LOG_LEVEL: /);
    for (const bad of ['2', 'abc', '4000', '1.5']) expect(() => configFromEnv({ DAGENT_LOOP_LEASE_SEC: bad })).toThrow(/^environment DAGENT_LOOP_LEASE_SEC: /);
  });
});
