import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { rowsOf } from '../helpers/factories.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { RATE_LIMIT_DEFAULTS } from '../../src/config/index.js';
import { refused, serverStart } from './helpers/server.js';
import { httpAgent } from './helpers/agent.js';
import { innocentBystander } from './helpers/innocent.js';

/**
 * A provider's rate limit pauses a model for the whole fleet, so who may pause which model, and for how long, is a
 * trust question: an agent pauses only a model its token was granted and its attempt was handed, and however often
 * it reports, for at most RATE_LIMIT_DEFAULTS.maxDelaySec, after which it cannot pause it again for as long.
 * Time passes by moving the pause's own timestamps back, as a clock would.
 */
const database = await testDatabase();
const { db } = database;
const server = await serverStart(database);
const MODEL = 'openai/gpt-4o';
const MAX = RATE_LIMIT_DEFAULTS.maxDelaySec;

const pause = async () => (await rowsOf<{ left: number; reporters: string[] }>(db, sql`
  select extract(epoch from until - now())::float8 as left, reporters from model_pauses where model = ${MODEL}`))[0];
/** `sec` seconds pass for the model's pause. */
const timePasses = (sec: number) => db.execute(sql`
  update model_pauses set until = until - make_interval(secs => ${sec}), started_at = started_at - make_interval(secs => ${sec}) where model = ${MODEL}`);
const onModel = (name: string, capability: string, keys: string[], models = `[${MODEL}]`) =>
  `name: ${name}\ntasks:\n${keys.map((k) => `  ${k}: { type: w, spec: { models: ${models}, constraints: { capabilities: [${capability}] } } }`).join('\n')}\n`;
const rateLimit = { error_class: 'rate_limit', message: '429 Too Many Requests', retry_after_sec: 86_400, model: MODEL };

describe('pausing a model for the fleet', () => {
  it('needs the model in the token\'s grant: registering one it was not granted is a 403', async () => {
    const { token } = await tokenCreate(db, { role: 'agent', agentId: 'ungranted', capabilities: ['w'] });
    await refused(403, 'FORBIDDEN', server.call('POST', '/api/agents', { token, body: { id: 'ungranted', type: 't', capabilities: ['w'], models: [MODEL] } }),
      /does not grant the models openai\/gpt-4o/);
    await refused(403, 'FORBIDDEN', server.call('POST', '/api/agents', { token, body: { id: 'ungranted', type: 't', capabilities: ['w'], models: ['*'] } }));
  });

  it('a task that names no model pauses none, and a model the attempt could not use is refused', async () => {
    const dagId = await server.submit(`name: no-model\ntasks:\n  own: { type: w, spec: { constraints: { capabilities: [no-model] } } }\n  two: { type: w, spec: { constraints: { capabilities: [no-model] } } }\n`);
    const hostile = await httpAgent(server, db, 'no-model-pauser', { capabilities: ['no-model'], models: [MODEL] });
    const [own, two] = await hostile.claim(dagId);
    const r = await hostile.fail(own!, rateLimit);
    expect([r.status, r.body.rateLimited]).toEqual([200, true]);
    expect(await pause()).toBeUndefined();
    // A model name it did not register (and one that is no model name at all) is refused; nothing changes.
    await refused(400, 'INVALID_INPUT', hostile.fail(two!, { ...rateLimit, model: 'anthropic/claude-opus-4' }), /body\.model: anthropic\/claude-opus-4 is not a model this attempt could use/);
    await refused(400, 'INVALID_INPUT', hostile.fail(two!, { ...rateLimit, model: 'gpt\u001b[31m\nfake: attribute' }), /body\.model/);
    expect(await pause()).toBeUndefined();
  });

  it('an agent renewing a pause in a loop holds it at most maxDelaySec, then cannot pause it again for as long; honest agents of another DAG get their work', async () => {
    const bystander = await innocentBystander(server, database, 'pause-bystander');
    const hostileDag = await server.submit(onModel('renewer', 'renew', ['h1', 'h2', 'h3', 'h4', 'h5', 'h6']));
    const honestDag = await server.submit(onModel('honest', 'honest', ['n1', 'n2']));
    const hostile = await httpAgent(server, db, 'renewer', { capabilities: ['renew'], models: [MODEL] });
    const honest = await httpAgent(server, db, 'honest-worker', { capabilities: ['honest'], models: [MODEL] });
    const held = await hostile.claim(hostileDag, 6);
    expect(held).toHaveLength(6);

    // The first report pauses the model for at most maxDelaySec, whatever Retry-After it names.
    expect((await hostile.fail(held[0]!, rateLimit)).status).toBe(200);
    expect((await pause())!.left).toBeGreaterThan(MAX - 10);
    expect((await pause())!.left).toBeLessThanOrEqual(MAX);
    expect(await honest.claim(honestDag)).toEqual([]);

    // Renewals in a loop as the pause nears its end extend it to no more than maxDelaySec past its start.
    await timePasses(MAX - 20);
    for (const t of held.slice(1, 3)) expect((await hostile.fail(t, rateLimit)).status).toBe(200);
    expect((await pause())!.left).toBeLessThanOrEqual(20);

    // Lifted: its reports no longer pause the model (they still put its own tasks off), and the honest agent works.
    await timePasses(30);
    for (const t of held.slice(3, 6)) expect((await hostile.fail(t, rateLimit)).status).toBe(200);
    expect((await pause())!.left).toBeLessThanOrEqual(0);
    const got = await honest.claim(honestDag);
    expect(got.map((t) => t.key).sort()).toEqual(['n1', 'n2']);

    // An agent that has not paused it in this run can: a real limit, reported by another agent, still pauses it.
    expect((await honest.fail(got[0]!, { ...rateLimit, retry_after_sec: 60 })).status).toBe(200);
    const p = (await pause())!;
    expect(p.left).toBeGreaterThan(50);
    expect(p.reporters).toEqual(['renewer', 'honest-worker']);
    await bystander.finish();
  });
});
