import { spawn, type ChildProcess } from 'node:child_process';
import { leash } from './child-leash.js';
import { afterEach } from 'vitest';
import { eventually } from './wait.js';
import { CLI_COMPILED } from './cli.js';

export interface AgentProcess { child: ChildProcess; output: () => string; exited: Promise<number | null> }

/**
 * `dagent agent run FILE --id ID` as real processes on a test's database; each
 * resolves once its agent is running, and any still alive after a test is killed. `directUrl`: DATABASE_DIRECT_URL
 * (default this process's; null: none, for a file's own server, which this process's direct URL does not lead to).
 */
export function agentProcesses(databaseUrl: string, directUrl?: string | null) {
  const started: AgentProcess[] = [];
  afterEach(() => {
    for (const p of started.splice(0)) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  });
  /**
   * Without `maintenance`, the process runs no maintenance loops, so a test drives the reaper and promoter itself.
   * `env`: more environment for the process (a limit, a workspace root).
   */
  return async (file: string, id: string, extra: string[] = [], o: { maintenance?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<AgentProcess> => {
    const args = [...CLI_COMPILED, 'agent', 'run', file, '--id', id, '--poll-ms', '200', ...(o.maintenance ? [] : ['--no-maintenance']), ...extra];
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl, DAGENT_LOG_LEVEL: 'warn', ...o.env };
    if (directUrl === null) delete env.DATABASE_DIRECT_URL;
    else if (directUrl) env.DATABASE_DIRECT_URL = directUrl;
    const child = leash(spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    child.stdout!.on('data', (b) => (out += b));
    child.stderr!.on('data', (b) => (out += b));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const p = { child, output: () => out, exited };
    started.push(p);
    await eventually(`agent ${id} running`, async () => out.includes('running with capabilities') || (child.exitCode !== null && Promise.reject(new Error(out))));
    return p;
  };
}
