import { spawn } from 'node:child_process';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { dagCreate, rowsOf } from '../helpers/factories.js';
import { CLI_COMPILED } from '../helpers/cli.js';
import { leash } from '../helpers/child-leash.js';
import { otlpReceiverStart } from '../helpers/otlp-receiver.js';
import { eventually } from '../helpers/wait.js';
import { dagGet } from '../../src/db/queries/dags.js';
import { attemptSpanId, dagSpanId, dagTraceId } from '../../src/observability/trace-ids.js';

// The compiled `dagent up` once exited 1 at start with any OTEL_* variable set: the bundle had turned the
// OpenTelemetry SDK (CommonJS, loaded with import()) into chunks exporting only `default`, while the
// sources, which the tests used to run, worked. The agent is plain JavaScript: a .ts agent would bring tsx's
// loader into the process, and it smoothed over that bundling mistake.
const database = await testDatabase();
const { db } = database;

/**
 * `dagent up` with the plain agent and these OTEL_* variables runs a one-task DAG to completion and is
 * stopped (SIGTERM flushes the exporter). Returns the DAG, its task and what the process printed.
 */
async function upRunsOneTask(name: string, otel: Record<string, string>) {
  const dagId = await dagCreate(db, `name: ${name}\ntasks:\n  a: { type: t, spec: { constraints: { capabilities: [plain] } } }\n`);
  const child = leash(spawn(process.execPath, [...CLI_COMPILED, 'up', '--port', '0', '--agent', 'test/fixtures/agents/plain.mjs:1'], {
    env: { ...process.env, DATABASE_URL: database.url, ...otel }, stdio: ['ignore', 'pipe', 'pipe'],
  }));
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b) => (stdout += b));
  child.stderr.on('data', (b) => (stderr += b));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await eventually('the DAG completed', async () => {
      if (child.exitCode !== null) throw new Error(`dagent up exited ${child.exitCode}: ${stderr}`);
      return (await dagGet(db, dagId))?.status === 'completed';
    }, 60_000);
    child.kill('SIGTERM');
    expect(await exited, stderr).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  const [task] = await rowsOf<{ id: string; fence: number }>(db, sql`select id, fence from tasks where dag_id = ${dagId}`);
  return { dagId, task: task!, stdout, stderr };
}

describe('dagent up (the compiled CLI) with tracing on', () => {
  it('OTEL_EXPORTER_OTLP_ENDPOINT: the DAG and its attempt reach the OTLP receiver as spans', async () => {
    const receiver = await otlpReceiverStart();
    try {
      const { dagId, task, stderr } = await upRunsOneTask('traced-up', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'dagent-up-test' });
      expect(stderr).toContain('exporting traces');
      expect(receiver.refused).toEqual([]);
      const mine = receiver.spans.filter((s) => s.traceId === dagTraceId(dagId)).sort((a, b) => a.name.localeCompare(b.name));
      expect(mine, stderr).toEqual([
        {
          name: 'dag traced-up', traceId: dagTraceId(dagId), spanId: dagSpanId(dagId), parentSpanId: undefined,
          attributes: expect.objectContaining({ 'dagent.dag.id': dagId, 'dagent.dag.name': 'traced-up', 'dagent.dag.status': 'completed' }),
          resource: expect.objectContaining({ 'service.name': 'dagent-up-test' }),
        },
        {
          // The attempt's span: from the plain agent's claim to its completion.
          name: 'task a', traceId: dagTraceId(dagId), spanId: attemptSpanId(task.id, task.fence), parentSpanId: dagSpanId(dagId),
          attributes: expect.objectContaining({ 'dagent.task.id': task.id, 'dagent.task.key': 'a', 'dagent.outcome': 'completed', 'dagent.agent.id': expect.stringMatching(/^plain-/) }),
          resource: expect.objectContaining({ 'service.name': 'dagent-up-test' }),
        },
      ]);
    } finally {
      await receiver.close();
    }
  }, 90_000);

  it('OTEL_TRACES_EXPORTER=console: it starts and prints the spans on stdout', async () => {
    const { dagId, task, stdout } = await upRunsOneTask('printed-up', { OTEL_TRACES_EXPORTER: 'console' });
    expect(stdout).toContain(`traceId: '${dagTraceId(dagId)}'`);
    expect(stdout).toContain("name: 'dag printed-up'");
    expect(stdout).toContain("name: 'task a'");
    expect(stdout).toContain(`'dagent.task.id': '${task.id}'`);
  }, 90_000);
});
