import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { LIVE_MS, testBrowser } from '../helpers/browser.js';
import { agentRegister, taskClaim, taskComplete, taskFail } from '../../src/index.js';
import { streamWrite } from '../../src/engine/attempt/streams.js';
import { LIMITS } from '../../src/config/index.js';

/**
 * A task's streams on its dashboard page, in headless Chromium (test/helpers/browser.ts) against the real server and
 * database: an agent's attempt writes (streamWrite, what ctx.stream and POST /api/tasks/:id/streams/:name do) while
 * the page shows the text growing, as text, through a reload, a dropped connection and the stream's end.
 */
const database = await testDatabase();
const http = await testHttp(database);
const { db } = database;
const { page, launchError, pageErrors, shot } = await testBrowser();

/** What a careless page would turn into markup, or run. */
const HOSTILE = ['<img src=x onerror=window.__pwned=1>', '<script>window.__pwned=2</script>'];

/** A task of its own DAG, claimed and started by `agent`: its ref, and a writer for its streams numbering chunks on. */
async function running(name: string, agent: string, yaml = '{ type: talk }') {
  const submitted = await http.call('POST', '/api/dags', { raw: `name: ${name}\ntasks:\n  talk: ${yaml}\n`, contentType: 'application/yaml' });
  expect(submitted.status).toBe(201);
  const dagId: string = submitted.body.results[0].dagId;
  const [t] = await taskClaim(db, agent, { start: true, dagId });
  return { id: t!.id, fence: t!.fence, dagId };
}
function writer(ref: { taskId: string; fence: number }, name = 'output') {
  let seq = 1;
  return async (chunks: Array<string | { json: unknown }>, end = false) => {
    const r = await streamWrite(db, ref, {
      name, fromSeq: seq, end,
      chunks: chunks.map((c) => (typeof c === 'string' ? { kind: 'text' as const, data: c } : { kind: 'json' as const, data: JSON.stringify(c.json) })),
    });
    expect(r.applied).toBe(true);
    seq = r.chunks + 1;
  };
}

const shown = () => page.locator('#task-stream').textContent();
// Polled from outside the page: the dashboard's Content-Security-Policy forbids evaluating strings inside it.
const showing = (text: string) => expect.poll(shown, { timeout: LIVE_MS }).toBe(text);
const status = (text: string) => page.waitForSelector(`#task-stream-status:text-is("${text}")`, { timeout: LIVE_MS });

describe('a task\'s stream in the dashboard', () => {
  it('grows live as text, survives a reload and a dropped connection intact, shows JSON as blocks and how each attempt\'s stream ended', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await agentRegister(db, { id: 'streamer', type: 'worker', capabilities: [], maxConcurrent: 10 });
    const t = await running('stream-demo', 'streamer', '{ type: talk, max_attempts: 2, retry: { strategy: immediate } }');
    const first = { taskId: t.id, fence: t.fence };
    const write = writer(first);

    // Signed in by the link, then the task's page: the attempt has written nothing yet, so nothing is shown.
    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector('#nav:not([hidden])', { timeout: LIVE_MS });
    await page.goto(`${http.url}/#/tasks/${encodeURIComponent(t.id)}`);
    await page.waitForSelector('#task-status[data-status="running"]', { timeout: LIVE_MS });
    expect(await page.locator('#task-streams').isHidden()).toBe(true);
    await page.evaluate('window.__noReload = true');

    // The first words appear without a reload, then more, appended to the same text node.
    await write(['Hello, ']);
    await showing('Hello, ');
    await status('output · attempt 1 (live) · 1 chunk(s)');
    const words = Array.from({ length: 40 }, (_, i) => `w${i} `);
    for (const w of words) await write([w]);
    let expected = `Hello, ${words.join('')}`;
    await showing(expected);
    expect(await page.locator('#task-stream').evaluate((el) => [...el.childNodes].map((n) => n.nodeName))).toEqual(['#text']);

    // Hostile text shows as the characters it is: no element made, no script run. Hidden characters show as escapes.
    await write([...HOSTILE, ' bell\x07 ansi\x1b[31m rtl\u202eevil cr\r\n']);
    expected += `${HOSTILE.join('')} bell\\x07 ansi\\x1b[31m rtl\\u202eevil cr\\r\n`;
    await showing(expected);
    expect(await page.locator('main img, main script, #task-stream *').count()).toBe(0);
    // A JSON chunk is a formatted block of its own, its strings as text too; text after it goes on below.
    const call = { tool: 'search', query: HOSTILE[0], n: 3 };
    await write([{ json: call }, 'after the call']);
    expected += `${JSON.stringify(call, null, 2)}after the call`;
    await showing(expected);
    expect(await page.locator('#task-stream code.stream-json').textContent()).toBe(JSON.stringify(call, null, 2));
    expect(await page.locator('#task-stream').evaluate((el) => [...el.childNodes].map((n) => n.nodeName))).toEqual(['#text', 'CODE', '#text']);
    expect(await page.locator('main img').count()).toBe(0);
    await status('output · attempt 1 (live) · 46 chunk(s)');
    expect(await page.evaluate('window.__noReload')).toBe(true);

    // A reload reads the stream from its start: the same text, still live.
    await page.reload();
    await showing(expected);
    await status('output · attempt 1 (live) · 46 chunk(s)');

    // The connection drops (a proxy, a server restart) while the agent writes on: the reader comes back after the
    // last chunk it showed (Last-Event-ID 46), so nothing shows twice or goes missing.
    const resumedFrom: Array<string | undefined> = [];
    page.on('request', (r) => { if (r.url().includes('/streams/output')) resumedFrom.push(r.headers()['last-event-id']); });
    http.server.app.server.closeAllConnections();
    await write([' written while cut off']);
    expected += ' written while cut off';
    await showing(expected);
    expect(resumedFrom).toContain('46');

    // The agent ends the stream: the page says so and stops following.
    await write([' The end.'], true);
    expected += ' The end.';
    await showing(expected);
    await page.waitForSelector('#task-stream-end[data-reason="ended"]:text-is("Ended by its agent.")', { timeout: LIVE_MS });
    await status('output · attempt 1 · 48 chunk(s)');
    await shot('11-task-stream');

    // The attempt fails and the retry streams: the page follows the new attempt's stream from its start; the first
    // attempt's stays readable, whole, from the picker.
    await taskFail(db, { ...first, errorClass: 'crash', message: 'killed' });
    const [again] = await taskClaim(db, 'streamer', { start: true, dagId: t.dagId });
    expect(again?.id).toBe(t.id);
    const second = { taskId: t.id, fence: again!.fence };
    await status('output · attempt 2 (live) · 0 chunk(s)');
    await writer(second)(['second try']);
    await showing('second try');
    await writer(second, 'notes')(['a note']);
    const options = () => page.locator('#task-stream-pick option').evaluateAll((os) => os.map((o) => o.textContent));
    await expect.poll(options, { timeout: LIVE_MS }).toEqual(['notes · attempt 2', 'output · attempt 2', 'output · attempt 1']);
    await page.selectOption('#task-stream-pick', { label: 'output · attempt 1' });
    await showing(expected);
    await page.waitForSelector('#task-stream-end[data-reason="ended"]', { timeout: LIVE_MS });
    await page.selectOption('#task-stream-pick', { label: 'output · attempt 2' });
    await showing('second try');

    // The attempt completes without ending its stream: the stream ends with it.
    await taskComplete(db, { ...second, output: { ok: true } });
    await page.waitForSelector('#task-stream-end[data-reason="attempt_ended"]:text-is("Ended with its attempt: completed.")', { timeout: LIVE_MS });
    await status('output · attempt 2 · 1 chunk(s)');
    expect(await shown()).toBe('second try');

    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });

  it('keeps the last million characters of a long stream, says how many it dropped, and a stream truncated at its attempt\'s bytes says so', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await agentRegister(db, { id: 'talker', type: 'worker', capabilities: [], maxConcurrent: 10 });
    const t = await running('stream-long', 'talker');
    const ref = { taskId: t.id, fence: t.fence };
    const write = writer(ref);
    // 20 chunks of 64 KiB, each of its own letter: 1,310,720 characters.
    const chunk = (i: number) => String.fromCharCode(97 + i).repeat(LIMITS.streamChunkBytes);
    const total = 20 * LIMITS.streamChunkBytes;
    await write(Array.from({ length: 20 }, (_, i) => chunk(i)));
    await page.goto(`${http.url}/#/tasks/${encodeURIComponent(t.id)}`);
    await status('output · attempt 1 (live) · 20 chunk(s)');
    const text = (await shown())!;
    expect(text.length).toBeLessThanOrEqual(1_000_000);
    expect(text.endsWith(chunk(19))).toBe(true);
    expect(total - text.length).toBeGreaterThan(total - 1_000_000 - 1);
    expect(await page.locator('#task-stream-dropped').textContent())
      .toBe(`${(total - text.length).toLocaleString('en')} earlier characters are not shown: the page keeps the last 1,000,000. dagent stream ${t.id} output --attempt 1 prints it all.`);
    // Dropped a text node at a time: here one per chunk, each past TEXT_NODE_CHARS (16 KiB) on its own.
    expect(await page.locator('#task-stream').evaluate((el) => el.childNodes.length)).toBe(text.length / LIMITS.streamChunkBytes);

    // The attempt's streams reach their bytes: the stream ends, truncated.
    let seq = 21;
    for (;;) {
      const r = await streamWrite(db, ref, { name: 'output', fromSeq: seq, chunks: Array.from({ length: 16 }, () => ({ kind: 'text' as const, data: chunk(seq % 20) })) });
      if (r.ended) break;
      seq = r.chunks + 1;
    }
    await page.waitForSelector('#task-stream-end[data-reason="truncated"]', { timeout: LIVE_MS });
    expect(await page.locator('#task-stream-end').textContent()).toBe('Truncated: its attempt\'s streams reached their size limit (the attempt went on).');
    expect((await shown())!.length).toBeLessThanOrEqual(1_000_000);
    expect(pageErrors).toEqual([]);
  });
});
