import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterEach } from 'vitest';

/** Whether python3 is on this machine: the Python agent's tests skip without it. */
export const hasPython = spawnSync('python3', ['--version']).status === 0;

export interface PythonAgent { child: ChildProcess; stopped: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; output: () => string }

/**
 * A Python agent fixture (test/fixtures/agents/*.py) run as a real process against a dagent HTTP server, with an
 * agent token of its own that grants `paid` and the model `paid`; the paid API's URL in DAGENT_TEST_PAID_API.
 * `stopped` resolves with its exit (killed past 60 s). Processes a test left running (stopped ones too) are killed
 * after it.
 */
export function pythonAgents(o: { url: string; paidApiUrl: string; agentToken: (id: string, caps: string[], validators: string[], models: string[]) => Promise<string> }) {
  const children = new Set<ChildProcess>();
  afterEach(() => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGCONT');
        c.kill('SIGKILL');
      }
    }
    children.clear();
  });
  return async (script: string, agentId: string, args: string[] = [], url = o.url): Promise<PythonAgent> => {
    const token = await o.agentToken(agentId, ['paid'], [], ['paid']);
    const child = spawn('python3', [script, '--poll-sec', '0.1', '--models', 'paid', ...args], {
      // No __pycache__ left in the checkout.
      env: { ...process.env, DAGENT_URL: url, DAGENT_TOKEN: token, DAGENT_AGENT_ID: agentId, DAGENT_TEST_PAID_API: o.paidApiUrl, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let output = '';
    child.stdout!.on('data', (b) => (output += b));
    child.stderr!.on('data', (b) => (output += b));
    const stopped = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal });
      });
    });
    return { child, stopped, output: () => output };
  };
}
