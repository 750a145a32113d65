import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { eventually } from '../helpers/wait.js';

// A supervisor or a log shipper that stops reading a node's stderr and then goes away (the scale scenario's
// parent, a crashed sidecar) must not leave the node unable to exit: it once spun for ever at exit, rewriting its
// buffered log lines to the broken pipe every 100 ms, and SIGTERM could not end it.
const database = await testDatabase({ poolSize: 2 });

describe('dagent up and its stderr', () => {
  it('exits on SIGTERM after its stderr reader stalled with lines pending and then closed the pipe', async () => {
    const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up'], {
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_HTTP_PORT: '0', DAGENT_LOG_LEVEL: 'debug', DAGENT_LOG_FORMAT: 'json' }, stdio: ['ignore', 'pipe', 'pipe'],
    }));
    const exited = new Promise<string>((resolve) => child.on('exit', (code, signal) => resolve(`${code}/${signal}`)));
    let out = '';
    const read = (b: Buffer) => (out += b);
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    try {
      const url = (await eventually('dagent up serving', async () => /on (http:\/\/\S+)\//.exec(out)?.[1], 60_000))!;
      // Stop reading stderr, and make the node log more than a pipe holds (each refused request is a line).
      child.stderr!.off('data', read);
      child.stderr!.pause();
      await Promise.all(Array.from({ length: 2000 }, () => fetch(`${url}/api/dags/nope`, { headers: { authorization: 'Bearer wrong' }, signal: AbortSignal.timeout(5000) }).catch(() => {})));
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 1000));
      child.stderr!.destroy(); // the reader goes away: writes now fail with EPIPE
      const end = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('still running 20 s later'), 20_000))]);
      expect(end).toBe('0/null');
    } finally {
      child.kill('SIGKILL');
    }
  }, 90_000);
});
