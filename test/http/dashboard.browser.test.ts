import { describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { LIVE_MS, testBrowser } from '../helpers/browser.js';
import { agentRegister, taskClaim, taskComplete, taskFail, type ClaimedTask } from '../../src/index.js';
import { stepRecord, stepReplay } from '../../src/engine/attempt/steps.js';
import { usageReport } from '../../src/engine/attempt/usage.js';

/**
 * The dashboard in a real (headless) Chromium (test/helpers/browser.ts) against the real server and database: tasks
 * move through the engine API while the page watches the event stream, without reloading. A task's streams are in
 * dashboard-streams.browser.test.ts.
 */
/** A page that draws 3,000 graph nodes, in a browser sharing two cores with the rest of the suite. */
const DRAW_3000_MS = 60_000;

const database = await testDatabase();
const http = await testHttp(database);
const { db } = database;

const DAG_YAML = `
name: browser-demo
title: Dashboard end-to-end
budget_usd: 5
tasks:
  plan:
    type: plan
    spec:
      prompt: Plan the release <b>carefully</b>.
      input: { version: "1.0" }
      models: [model-small]
  build:
    type: build
    depends_on: [plan]
    max_attempts: 1
    spec: { context: [plan] }
  docs:
    type: docs
    depends_on: [plan]
  ship:
    type: ship
    depends_on: [build, docs]
`;

/** An output a careless page would turn into markup. */
const HOSTILE = '<img src=x onerror=window.__pwned=1>';

const { page, launchError, pageErrors, shot } = await testBrowser();
const node = (key: string, status: string) => page.waitForSelector(`g.node[data-key="${key}"][data-status="${status}"]`, { timeout: LIVE_MS });
const dagStatus = (status: string) => page.waitForSelector(`#dag-status[data-status="${status}"]:text-is("${status}")`, { timeout: LIVE_MS });

async function claim(dagId: string, keys: string[]): Promise<Map<string, ClaimedTask>> {
  const claimed = await taskClaim(db, 'a1', { start: true, dagId, limit: keys.length });
  expect(claimed.map((t) => t.key).sort()).toEqual([...keys].sort());
  return new Map(claimed.map((t) => [t.key, t]));
}

async function taskStatus(dagId: string, key: string): Promise<string> {
  const { rows } = await db.execute<{ status: string }>(sql`select status from tasks where dag_id = ${dagId} and key = ${key}`);
  return rows[0]!.status;
}

describe('dashboard in a browser', () => {
  it('follows a DAG live through a dead letter, a retry from the DLQ page and completion', async () => {
    // Not a skip: the browser is a dev dependency, so one that does not start is a broken setup.
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await agentRegister(db, { id: 'a1', type: 'worker', capabilities: [], models: ['model-small'], maxConcurrent: 10 });
    const submitted = await http.call('POST', '/api/dags', { raw: DAG_YAML, contentType: 'application/yaml' });
    expect(submitted.status).toBe(201);
    const dagId: string = submitted.body.results[0].dagId;

    // The DAG list; the token from the fragment is kept and removed from the address bar.
    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector(`tr[data-dag-id="${dagId}"] a[href="#/dags/${dagId}"]`, { timeout: LIVE_MS });
    expect(page.url()).not.toContain('token=');
    expect(await page.evaluate("localStorage.getItem('dagent.token')")).toBe(http.adminToken);
    await shot('01-dag-list');

    // The DAG page. A marker on window shows later that nothing reloaded the page.
    await page.click(`a[href="#/dags/${dagId}"]`);
    await node('plan', 'ready');
    await node('ship', 'pending');
    await dagStatus('running');
    await page.evaluate('window.__noReload = true');
    // Four nodes, four edges with arrowheads, and a highlighted critical path.
    expect(await page.locator('svg.dag-graph g.node').count()).toBe(4);
    expect(await page.locator('svg.dag-graph path.edge').count()).toBe(4);
    expect(await page.locator('svg.dag-graph g.node.critical').count()).toBeGreaterThanOrEqual(2);

    const plan = (await claim(dagId, ['plan'])).get('plan')!;
    await node('plan', 'running');
    await taskComplete(db, { taskId: plan.id, fence: plan.fence, output: { summary: HOSTILE, steps: 3 }, costUsd: 0.25 });
    await node('plan', 'completed');
    await node('build', 'ready');
    await node('docs', 'ready');

    // build fails for good (max_attempts 1, not retryable): dead-lettered, the DAG is blocked; docs keeps running.
    const second = await claim(dagId, ['build', 'docs']);
    const build = second.get('build')!;
    const docs = second.get('docs')!;
    const failed = await taskFail(db, { taskId: build.id, fence: build.fence, errorClass: 'crash', message: 'compiler exploded', retryable: false });
    expect(failed.status).toBe('dead_lettered');
    const deadLetterId = (failed as { deadLetterId: string }).deadLetterId;
    await node('build', 'dead_lettered');
    await node('docs', 'running');
    await dagStatus('blocked');
    await page.waitForSelector(`a[href="#/dlq/${deadLetterId}"]`, { timeout: LIVE_MS });
    await page.waitForSelector('#dlq-count:text-is("1")', { timeout: LIVE_MS });
    await shot('02-dag-running');

    // The task page of the completed task: output (as text, not markup) and attempt history.
    await page.click('g.node[data-key="plan"]');
    const output = await page.waitForSelector('#task-output', { timeout: LIVE_MS });
    expect(await output.textContent()).toContain(HOSTILE);
    expect(await page.locator('main img').count()).toBe(0);
    await page.waitForSelector('#attempts tr[data-attempt="1"]:has-text("completed"):has-text("a1")', { timeout: LIVE_MS });
    await page.waitForSelector('#task-status[data-status="completed"]', { timeout: LIVE_MS });
    expect(await page.locator('main').textContent()).toContain('Plan the release <b>carefully</b>.');
    await shot('03-task');

    // The DLQ page: the entry, its failure history, client-side checks, then Retry.
    await page.click('a[data-nav="dlq"]');
    const retry = `button[data-action="retry"][data-id="${deadLetterId}"]`;
    await page.waitForSelector(retry, { timeout: LIVE_MS });
    const card = page.locator(`article.dlq-entry[data-id="${deadLetterId}"]`);
    await card.getByRole('button', { name: 'Show failure history' }).click();
    await card.locator('table.history tr:has-text("compiler exploded")').waitFor({ timeout: LIVE_MS });
    // Cancel needs a note; the edit form refuses input that is not a JSON object.
    await card.locator('button[data-action="cancel"]').click();
    await card.locator('.action-msg.error:has-text("note is required")').waitFor({ timeout: LIVE_MS });
    await card.locator('button[data-action="edit"]').click();
    const inputBox = card.locator('textarea.edit-input');
    // Polled from outside the page: the dashboard's Content-Security-Policy forbids evaluating strings inside it.
    await expect.poll(async () => (await inputBox.inputValue()).trim(), { timeout: LIVE_MS }).toBe('{}');
    await inputBox.fill('{"broken": ');
    await card.locator('.field-error:has-text("not valid JSON")').waitFor({ timeout: LIVE_MS });
    expect(await card.locator('button[data-action="edit-retry"]').isDisabled()).toBe(true);
    await inputBox.fill('{"retry": true}');
    // The server's refusal is shown as it came (max_attempts must be at least 1).
    await card.locator('input.edit-max-attempts').fill('0');
    await card.locator('button[data-action="edit-retry"]').click();
    await card.locator('.action-msg.error:has-text("400 INVALID_INPUT: body.edit.max_attempts")').waitFor({ timeout: LIVE_MS });
    await card.locator('input.edit-max-attempts').fill('1');
    await shot('04-dlq');
    await card.locator('button[data-action="edit"]').click();

    await card.locator('input.note').fill('flaky compiler, retrying');
    await page.click(retry);
    await page.waitForSelector(retry, { state: 'detached', timeout: LIVE_MS });
    expect(await taskStatus(dagId, 'build')).toBe('ready');
    await page.waitForSelector('#dlq-count:text-is("0")', { timeout: LIVE_MS });

    // The agents page lists a1.
    await page.click('a[data-nav="agents"]');
    await page.waitForSelector('tr[data-agent-id="a1"]:has-text("worker")', { timeout: LIVE_MS });
    await page.waitForSelector('tr[data-agent-id="a1"] .heartbeat:has-text("ago")', { timeout: LIVE_MS });
    await shot('05-agents');

    // Back to the DAG page (a hash change, not a reload): the rest completes live.
    await page.click('a[data-nav="dags"]');
    await page.click(`a[href="#/dags/${dagId}"]`);
    await node('build', 'ready');
    await dagStatus('running');
    const rebuilt = (await claim(dagId, ['build'])).get('build')!;
    await taskComplete(db, { taskId: rebuilt.id, fence: rebuilt.fence, output: { artifact: 'app.tar.gz' } });
    await taskComplete(db, { taskId: docs.id, fence: docs.fence, output: { pages: 12 } });
    await node('build', 'completed');
    await node('docs', 'completed');
    const ship = (await claim(dagId, ['ship'])).get('ship')!;
    await node('ship', 'running');
    await taskComplete(db, { taskId: ship.id, fence: ship.fence, output: { shipped: true } });
    await node('ship', 'completed');
    await dagStatus('completed');
    await shot('06-dag-completed');

    expect(await page.evaluate('window.__noReload')).toBe(true);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });
});

describe('approvals and re-runs in the dashboard', () => {
  it('an output waiting for a person shows live; a rejection needs a comment and sends it back, an edited approval completes the task, and Re-run runs it again', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await agentRegister(db, { id: 'writer', type: 'worker', capabilities: [], maxConcurrent: 10 });
    const submitted = await http.call('POST', '/api/dags', { raw: `
name: reviewed-post
tasks:
  draft:
    type: write
    retry: { strategy: immediate }
    output: { validation: { kind: approval, prompt: "Fit to publish?" } }
`, contentType: 'application/yaml' });
    const dagId: string = submitted.body.results[0].dagId;
    const write = async (output: unknown) => {
      const [t] = await taskClaim(db, 'writer', { start: true, dagId });
      await taskComplete(db, { taskId: t!.id, fence: t!.fence, output });
      return t!.id;
    };
    await page.goto(`${http.url}/#/approvals`);
    await page.waitForSelector('text=No approval is waiting.', { timeout: LIVE_MS });
    const draftId = await write({ text: HOSTILE });

    // It arrives without a reload, its output as text.
    const card = page.locator(`article.approval[data-task-id="${draftId}"]`).first();
    await card.waitFor({ timeout: LIVE_MS });
    expect(await card.locator('.approval-output').textContent()).toContain(HOSTILE);
    expect(await card.textContent()).toContain('Fit to publish?');
    expect(await card.textContent()).not.toContain('[object');
    await card.locator('button[data-action="reject"]').click();
    await card.locator('.action-msg.error:has-text("needs a comment")').waitFor({ timeout: LIVE_MS });
    await card.locator('input.comment').fill('cite your sources');
    await card.locator('button[data-action="reject"]').click();
    await card.locator('.action-msg.ok:has-text("Rejected; the task is ready")').waitFor({ timeout: LIVE_MS });
    expect(await taskStatus(dagId, 'draft')).toBe('ready');
    await shot('07-approvals');

    // The second draft waits again: approve it with an edited output.
    await write({ text: 'v2 (sources: INC-7)' });
    const pending = page.locator(`article.approval[data-task-id="${draftId}"]:not(.resolved)`);
    await pending.waitFor({ timeout: LIVE_MS });
    // Held by the approval's own id: the card stays the same element once it is decided.
    const again = page.locator(`article.approval[data-approval-id="${await pending.getAttribute('data-approval-id')}"]`);
    await again.locator('button[data-action="edit"]').click();
    await again.locator('textarea.edit-output').fill('{"text": "v2, edited"}');
    await again.locator('button[data-action="approve"]').click();
    await again.locator('.action-msg.ok:has-text("Approved; the task is completed")').waitFor({ timeout: LIVE_MS });
    const { rows } = await db.execute<{ status: string; output: unknown }>(sql`select status, output from tasks where id = ${draftId}`);
    expect(rows[0]).toEqual({ status: 'completed', output: { text: 'v2, edited' } });

    // An approval task (no agent behind it) shows its upstream outputs; approving it completes it.
    const gate = await http.call('POST', '/api/dags', { raw: 'name: gated\ntasks:\n  notes: { type: write }\n  signoff: { type: gate, depends_on: [notes], approval: { prompt: "Ship it?" } }\n', contentType: 'application/yaml' });
    const gateDag: string = gate.body.results[0].dagId;
    const [notes] = await taskClaim(db, 'writer', { start: true, dagId: gateDag });
    await taskComplete(db, { taskId: notes!.id, fence: notes!.fence, output: { text: 'release notes v1' } });
    await page.goto(`${http.url}/#/approvals`);
    const gateCard = page.locator('article.approval:has-text("approval task")').first();
    await gateCard.waitFor({ timeout: LIVE_MS });
    expect(await gateCard.textContent()).toContain('Ship it?');
    expect(await gateCard.locator('.approval-output').textContent()).toContain('release notes v1');
    await gateCard.locator('button[data-action="approve"]').click();
    await gateCard.locator('.action-msg.ok:has-text("Approved; the task is completed")').waitFor({ timeout: LIVE_MS });
    expect(await taskStatus(gateDag, 'signoff')).toBe('completed');

    // The task page offers Re-run for a finished task.
    await page.goto(`${http.url}/#/tasks/${draftId}`);
    await page.waitForSelector('#task-status[data-status="completed"]', { timeout: LIVE_MS });
    await page.click('button[data-action="task-rerun"]');
    await page.waitForSelector('.action-msg.ok:has-text("Running again: draft (was completed)")', { timeout: LIVE_MS });
    expect(await taskStatus(dagId, 'draft')).toBe('ready');

    // A DAG with a dead-lettered task offers Re-run failed.
    const failing = await http.call('POST', '/api/dags', { raw: 'name: fails-once\ntasks:\n  only: { type: write, max_attempts: 1 }\n', contentType: 'application/yaml' });
    const failingId: string = failing.body.results[0].dagId;
    const [only] = await taskClaim(db, 'writer', { start: true, dagId: failingId });
    await taskFail(db, { taskId: only!.id, fence: only!.fence, errorClass: 'crash', message: 'boom' });
    await page.goto(`${http.url}/#/dags/${failingId}`);
    await dagStatus('blocked');
    await page.click('button[data-action="dag-rerun-failed"]');
    await dagStatus('running');
    expect(await taskStatus(failingId, 'only')).toBe('ready');
    await page.waitForSelector('button[data-action="dag-rerun-failed"]', { state: 'hidden', timeout: LIVE_MS });

    // A model a rate limit paused shows on the agents page, and goes once lifted.
    await page.click('a[data-nav="agents"]');
    await page.waitForSelector('tr[data-agent-id="writer"]', { timeout: LIVE_MS });
    expect(await page.locator('#paused-models').isHidden()).toBe(true);
    await db.execute(sql`insert into model_pauses (model, until, reason) values ('gpt-busy', now() + interval '5 minutes', '429 Too Many Requests')`);
    await page.waitForSelector('#paused-models tr[data-model="gpt-busy"]:has-text("429 Too Many Requests")', { timeout: LIVE_MS });
    await db.execute(sql`delete from model_pauses`);
    await page.waitForSelector('#paused-models', { state: 'hidden', timeout: LIVE_MS });
    // A declared rate limit shows with what its window holds.
    expect(await page.locator('#rate-limits').isHidden()).toBe(true);
    const put = await http.call('PUT', `/api/rate-limits/${encodeURIComponent('acme/gpt')}`, { body: { requests: 500, tokens: '300k' } });
    expect(put.status).toBe(200);
    await page.waitForSelector('#rate-limits tr[data-limit="acme/gpt"]:has-text("0 / 500")', { timeout: LIVE_MS });
    expect(await page.locator('#rate-limits tr[data-limit="acme/gpt"]').textContent()).toContain('0 / 300,000');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });
});

describe('a task\'s log in the dashboard', () => {
  it('shows what the agent logged, as text, and new lines live while the attempt runs', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    const { attemptLogAppend } = await import('../../src/engine/read/attempt-logs.js');
    await agentRegister(db, { id: 'talker', type: 'worker', capabilities: [], maxConcurrent: 10 });
    const submitted = await http.call('POST', '/api/dags', { raw: 'name: log-demo\ntasks:\n  talk: { type: talk }\n', contentType: 'application/yaml' });
    const dagId: string = submitted.body.results[0].dagId;
    const [t] = await taskClaim(db, 'talker', { start: true, dagId });
    const ref = { taskId: t!.id, fence: t!.fence };
    await attemptLogAppend(db, ref, [{ level: 'info', message: 'cloning the repository', fields: { repo: 'api' } }, { level: 'warn', message: HOSTILE }]);

    await page.goto(`${http.url}/#/tasks/${encodeURIComponent(t!.id)}`);
    const log = page.locator('#task-log');
    await page.waitForSelector('#task-log .level-warn', { timeout: LIVE_MS });
    expect(await log.textContent()).toContain('INFO  cloning the repository {"repo":"api"}');
    expect(await log.textContent()).toContain(HOSTILE);
    expect(await page.locator('main img').count()).toBe(0);
    await page.waitForSelector('#task-log-status:has-text("Attempt 1 (running: live) · 2 line(s)")', { timeout: LIVE_MS });
    // No durable step yet: nothing shown; one recorded now shows without a reload.
    await page.waitForSelector('#task-steps[data-recorded="0"]', { state: 'attached', timeout: LIVE_MS });
    expect(await page.locator('#task-steps').textContent()).toBe('');
    await stepRecord(db, { ...ref, name: 'clone', result: { ok: true }, costUsd: 0.01 });
    await page.waitForSelector('#task-steps-recorded tr[data-step="clone"]:has-text("$0.01")', { timeout: LIVE_MS });

    // A line logged now appears without a reload; when the attempt ends, the page says so.
    await attemptLogAppend(db, ref, [{ level: 'error', message: 'tests failed: 3' }]);
    await page.waitForSelector('#task-log .level-error:has-text("tests failed: 3")', { timeout: LIVE_MS });
    await taskComplete(db, { ...ref, output: { ok: true } });
    await page.waitForSelector('#task-log-status:text-is("Attempt 1 · 3 line(s)")', { timeout: LIVE_MS });
    expect(await log.locator('.log-line').count()).toBe(3);
    await shot('07-task-log');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });
});

describe('a DAG\'s timeline and cost in the dashboard', () => {
  it('draws a Gantt row per task with its stretches (a failed attempt, its retry wait), marks the critical path and lists cost per model and per task, live', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await agentRegister(db, { id: 'timed', type: 'worker', capabilities: [], maxConcurrent: 10, models: ['*'] });
    const submitted = await http.call('POST', '/api/dags', {
      raw: 'name: timeline-demo\ntasks:\n  fetch: { type: t, max_attempts: 2, retry: { strategy: immediate } }\n  side: { type: t }\n  summarize: { type: t, depends_on: [fetch] }\n',
      contentType: 'application/yaml',
    });
    const dagId: string = submitted.body.results[0].dagId;
    const byKey = async () => new Map((await taskClaim(db, 'timed', { start: true, dagId, limit: 5 })).map((t) => [t.key, t]));
    const first = await byKey();
    const fetch1 = first.get('fetch')!;
    await new Promise((r) => setTimeout(r, 50));
    // The first attempt records two durable steps (one named as markup), the retry replays the task-scoped one.
    await stepRecord(db, { taskId: fetch1.id, fence: fetch1.fence, name: 'search', result: { hits: 3 }, durationMs: 20, costUsd: 0.05, tokensIn: 900, tokensOut: 40 });
    await stepRecord(db, { taskId: fetch1.id, fence: fetch1.fence, name: HOSTILE, result: null, scope: 'attempt' });
    await taskFail(db, { taskId: fetch1.id, fence: fetch1.fence, errorClass: 'crash', message: 'reset by peer', costUsd: 0.12, model: 'model-small' });
    await taskComplete(db, { taskId: first.get('side')!.id, fence: first.get('side')!.fence, output: {}, costUsd: 0.5, model: 'model-large' });
    const again = (await byKey()).get('fetch')!;
    expect(await stepReplay(db, { taskId: again.id, fence: again.fence }, 'search')).toMatchObject({ result: { hits: 3 } });
    await taskComplete(db, { taskId: again.id, fence: again.fence, output: {}, costUsd: 0.2, model: 'model-small' });

    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.goto(`${http.url}/#/dags/${encodeURIComponent(dagId)}`);
    await page.waitForSelector('#dag-timeline svg.timeline g.row[data-key="fetch"] rect[data-kind="retry_wait"]', { timeout: LIVE_MS });
    const fetchRow = page.locator('#dag-timeline g.row[data-key="fetch"]');
    expect(await fetchRow.locator('rect.seg').evaluateAll((rs) => rs.map((r) => r.getAttribute('class')))).toEqual([
      'seg seg-queued', 'seg seg-running outcome-failed', 'seg seg-retry_wait', 'seg seg-running outcome-completed',
    ]);
    expect(await fetchRow.locator('rect.seg-running title').first().textContent()).toMatch(/^fetch: running, attempt 1 \(failed\), model-small, /);
    // Its durable steps under its attempts: those recorded under the failed one, the replay an outlined mark within the retry.
    const spanOf = (sel: string) => fetchRow.locator(sel).evaluateAll((rs) => rs.map((r) => [r.getAttribute('data-step'), Number(r.getAttribute('x')), Number(r.getAttribute('x')) + Number(r.getAttribute('width'))]));
    const [failedRun, completedRun] = (await spanOf('rect.seg-running')).map(([, x1, x2]) => [x1 as number, x2 as number]);
    const recordedBars = await spanOf('rect.step-recorded');
    expect(recordedBars.map(([name]) => name)).toEqual(['search', HOSTILE]);
    // Where each begins (a bar is at least one unit wide, so its end may pass a run that ended within that unit).
    for (const [, x1] of recordedBars) expect(x1! >= failedRun![0]! && x1! <= failedRun![1]!).toBe(true);
    const [replayMark] = await spanOf('rect.step-replayed');
    const replayAt = (replayMark![1]! + replayMark![2]!) / 2;
    expect(replayAt >= completedRun![0]! && replayAt <= completedRun![1]!).toBe(true);
    expect(await fetchRow.locator('rect.step-replayed title').textContent()).toBe(`fetch: step search, attempt ${again.attempt}, replayed: $0.05 not paid again`);
    expect(await page.locator('#dag-cost table.cost-models tr[data-model="model-small"] td').allTextContents()).toEqual(['model-small', '$0.32', '0', '0', '2']);
    expect(await page.locator('#dag-cost table.cost-models tr[data-model="model-large"] td').first().textContent()).toBe('model-large');
    // And per task, the costliest first: a failed attempt's spend counts toward its task.
    expect(await page.locator('#dag-cost table.cost-tasks tr[data-key]').evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('td')].map((c) => c.textContent))))
      .toEqual([['side', '$0.50'], ['fetch', '$0.32']]);

    // summarize runs now: its row appears without a reload, and the path through fetch is critical.
    const last = (await byKey()).get('summarize')!;
    await taskComplete(db, { taskId: last.id, fence: last.fence, output: {} });
    await page.waitForSelector('#dag-timeline g.row.critical[data-key="summarize"] rect.seg-running', { timeout: LIVE_MS });
    expect(await page.locator('#dag-timeline g.row.critical').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-key')))).toEqual(['fetch', 'summarize']);
    await shot('08-dag-timeline');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();

    // fetch's page lists its steps, recorded and replayed, the name that looks like markup as text.
    await page.goto(`${http.url}/#/tasks/${encodeURIComponent(fetch1.id)}`);
    await page.waitForSelector('#task-steps-replayed tr[data-step="search"]', { timeout: LIVE_MS });
    const cells = (sel: string) => page.locator(sel).evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('td')].map((c) => c.querySelector('time') ? 'time' : c.textContent)));
    expect(await cells('#task-steps-recorded tbody tr')).toEqual([
      ['search', 'task', '1', 'time', '10 B', '20 ms', '$0.05', '900 / 40'],
      [HOSTILE, 'attempt', '1', 'time', '4 B', '—', '$0.00', '0 / 0'],
    ]);
    expect(await page.locator('#task-steps h3').textContent()).toBe('Replayed (1, $0.05 not paid again)');
    expect(await cells('#task-steps-replayed tbody tr')).toEqual([['search', String(again.attempt), 'time', '$0.05']]);
    expect(await page.locator('main img').count()).toBe(0);
    await shot('09-task-steps');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });
});

describe('spend in the dashboard', () => {
  it('shows a DAG\'s spend against its budget, a running attempt against its max cost, a stop live, and each model, its name as text and an unknown cost as unknown', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await agentRegister(db, { id: 'spender', type: 'worker', capabilities: ['pay'], maxConcurrent: 10, models: ['*'] });
    const submitted = await http.call('POST', '/api/dags', {
      raw: 'name: spend-demo\nbudget_usd: 2\ntasks:\n  long: { type: t, spec: { constraints: { capabilities: [pay], max_cost_usd: 1 } } }\n  capped: { type: t, spec: { constraints: { capabilities: [pay], max_cost_usd: 0.1 } } }\n',
      contentType: 'application/yaml',
    });
    const dagId: string = submitted.body.results[0].dagId;
    const held = new Map((await taskClaim(db, 'spender', { start: true, dagId, limit: 2 })).map((t) => [t.key, t]));
    const [long, capped] = [held.get('long')!, held.get('capped')!];
    // A model name is the reporter's text: an agent run in a dagent process may name any.
    await usageReport(db, { taskId: long.id, fence: long.fence }, { reportKey: 'r1', costUsd: 0.3, tokensIn: 1200, model: HOSTILE });
    // A report whose cost was unknown (cost_usd null).
    await usageReport(db, { taskId: long.id, fence: long.fence }, { reportKey: 'u1', costUsd: null, tokensIn: 30, model: 'model-unpriced' });

    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.click('a[data-nav="spend"]');
    const cells = (sel: string) => page.locator(`${sel} td`).allTextContents();
    const dagRow = `#spend-dags tr[data-dag-id="${dagId}"]`;
    await page.waitForSelector(dagRow, { timeout: LIVE_MS });
    // Budget, spent, reserved (1 − 0.3 for long, 0.1 for capped), left.
    expect((await cells(dagRow)).slice(2)).toEqual(['$2.00', '$0.30', '$0.80', '$0.90']);
    expect(await page.locator(`#spend-running tr[data-task-id="${long.id}"] .progress-text`).textContent()).toBe('$0.30 of $1.00');
    expect(await page.locator(`#spend-stops tr[data-task-id="${capped.id}"]`).count()).toBe(0);
    const models = page.locator('#spend-models tbody tr');
    const modelRows = async () => (await models.evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('td')].map((c) => c.textContent))))
      .filter(([m]) => m === HOSTILE || m === 'model-unpriced');
    expect(await modelRows()).toEqual([[HOSTILE, '$0.30', '1,200', '0', '1'], ['model-unpriced', 'cost unknown', '30', '0', '1']]);
    expect(await page.locator('main img').count()).toBe(0);

    // capped reports past its max cost: stopped; the page shows the stop and the DAG's new spend without a reload.
    await page.evaluate('window.__noReload = true');
    await usageReport(db, { taskId: capped.id, fence: capped.fence }, { reportKey: 'c1', costUsd: 0.25, model: 'model-small' });
    const stopRow = `#spend-stops tr[data-task-id="${capped.id}"]`;
    await page.waitForSelector(stopRow, { timeout: LIVE_MS });
    expect((await cells(stopRow)).slice(1)).toEqual(['capped', 'spender', 'task.max_cost_usd', '$0.25 / $0.10']);
    await page.waitForSelector(`${dagRow} td:text-is("$0.55")`, { timeout: LIVE_MS });
    await shot('10-spend');
    // The stop links to its task.
    await page.click(`${stopRow} a[href="#/tasks/${capped.id}"]`);
    await page.waitForSelector('#task-status[data-status="dead_lettered"]', { timeout: LIVE_MS });
    expect(await page.evaluate('window.__noReload')).toBe(true);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });
});

describe('the dashboard at scale', () => {
  it('searches and pages the DAG list on the server; draws a 3,000-task fan-out folded, live, zoomable; filters and pages the dead letters, retries every match at once and cancels every match with a note', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    const { dagSubmit } = await import('../../src/engine/dag/submit.js');
    const { dagSourceLoad } = await import('../../src/dag/load.js');
    for (let i = 0; i < 120; i++) {
      const tags = i % 24 === 0 ? '\n    tags: [nightly]' : '';
      await dagSubmit(db, [await dagSourceLoad(`name: bulk-${String(i).padStart(3, '0')}\ntasks:\n  a:\n    type: idle${tags}\n`, 'inline.yaml')]);
    }
    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector('table.dags');
    const rows = () => page.locator('table.dags tr[data-dag-id]');
    const firstName = async () => (await rows().first().locator('td a').first().textContent())!;
    await page.fill('form.filters input[name="q"]', 'BULK-');
    await page.press('form.filters input[name="q"]', 'Enter');
    await page.waitForSelector('.page-no:text-is("page 1 · 50 shown")', { timeout: LIVE_MS });
    expect(await firstName()).toBe('bulk-119');
    await page.click('button[data-action="page-older"]');
    await page.waitForSelector('.page-no:text-is("page 2 · 50 shown")', { timeout: LIVE_MS });
    expect(await firstName()).toBe('bulk-069');
    await page.click('button[data-action="page-older"]');
    await page.waitForSelector('.page-no:text-is("page 3 · 20 shown")', { timeout: LIVE_MS });
    expect(await page.locator('button[data-action="page-older"]').isDisabled()).toBe(true);
    await page.click('button[data-action="page-newer"]');
    await page.waitForSelector('.page-no:text-is("page 2 · 50 shown")', { timeout: LIVE_MS });
    await page.fill('form.filters input[name="q"]', '');
    await page.fill('form.filters input[name="tag"]', 'nightly');
    await page.click('button[data-action="filters-apply"]');
    await page.waitForSelector('.page-no:text-is("page 1 · 5 shown")', { timeout: LIVE_MS });
    expect(await rows().locator('td a').allTextContents()).toEqual(['bulk-096', 'bulk-072', 'bulk-048', 'bulk-024', 'bulk-000']);
    await shot('09-dag-list-search');

    // A plan, 3,000 reviews after it and a join after them all: three nodes, the reviews folded into one.
    const reviews = Array.from({ length: 3000 }, (_, i) => `  review-${i}: { type: review, depends_on: [plan] }`);
    const big = await http.call('POST', '/api/dags', {
      raw: ['name: wide-review', 'tasks:', '  plan: { type: plan }', ...reviews, `  join: { type: join, depends_on: [${Array.from({ length: 3000 }, (_, i) => `review-${i}`).join(', ')}] }`].join('\n'),
      contentType: 'application/yaml',
    });
    expect(big.status, JSON.stringify(big.body)).toBe(201);
    const bigId: string = big.body.results[0].dagId;
    await page.goto(`${http.url}/#/dags/${encodeURIComponent(bigId)}`);
    const group = page.locator('svg.dag-graph g.node.group');
    await group.waitFor({ timeout: LIVE_MS });
    expect(await page.locator('svg.dag-graph g.node').count()).toBe(3);
    expect(await page.locator('svg.dag-graph path.edge').count()).toBe(2);
    expect(await group.getAttribute('data-group')).toBe('3000');
    expect(await group.getAttribute('aria-label')).toBe('3000 tasks review-0 to review-2999: 3000 pending');
    // Fitted to the frame, and it zooms.
    await page.waitForSelector('svg.dag-graph[data-scale]');
    const fitted = Number(await page.locator('svg.dag-graph').getAttribute('data-scale'));
    expect(fitted).toBeGreaterThan(0);
    expect(fitted).toBeLessThanOrEqual(1);
    await page.click('button[data-action="graph-zoom-in"]');
    const scale = async () => Number(/scale\(([\d.]+)\)/.exec((await page.locator('svg.dag-graph').getAttribute('style')) ?? '')?.[1] ?? 1);
    await expect.poll(scale, { timeout: LIVE_MS }).toBeGreaterThan(fitted);

    // The reviews start: the folded node counts them live, and turns to the most urgent status among them.
    await agentRegister(db, { id: 'reviewer', type: 'worker', capabilities: [], maxConcurrent: 100 });
    const [plan] = await taskClaim(db, 'reviewer', { start: true, dagId: bigId });
    await taskComplete(db, { taskId: plan!.id, fence: plan!.fence, output: {} });
    const batch = await taskClaim(db, 'reviewer', { start: true, dagId: bigId, limit: 12 });
    for (const t of batch.slice(0, 10)) await taskComplete(db, { taskId: t.id, fence: t.fence, output: {} });
    await page.waitForSelector('svg.dag-graph g.node.group[data-status="running"] .node-sub:text-matches("2988 ready · 10 completed · 2 running|10 completed")', { timeout: LIVE_MS });
    expect(await group.locator('title').textContent()).toContain('10 completed');
    // The timeline draws the first 200 rows, and all of them on demand.
    await page.waitForSelector('#dag-timeline button[data-action="timeline-all"]:text-is("Show all 3002 tasks")', { timeout: LIVE_MS });
    expect(await page.locator('#dag-timeline g.row').count()).toBe(200);
    // The Tasks table lists the most urgent first, 500 of them, and the rest on demand.
    expect(await page.locator('button[data-action="tasks-all"]').textContent()).toBe('Show all 3002 tasks');
    expect(await page.locator('section.card.flush table tr[data-key]').count()).toBe(500);
    // (Live recolouring keeps the rows where they are; the refetch after it sorts them again.)
    await expect.poll(() => page.locator('section.card.flush table tr[data-key] .badge').first().textContent(), { timeout: LIVE_MS }).toBe('running');
    await shot('10-wide-dag');

    // Dead letters: filter by error class, and retry every match at once (the filter is the bulk action's).
    const poison = await http.call('POST', '/api/dags', {
      raw: ['name: poison-many', 'tasks:', ...Array.from({ length: 6 }, (_, i) => `  p${i}: { type: poison, max_attempts: 1 }`)].join('\n'), contentType: 'application/yaml',
    });
    const poisonId: string = poison.body.results[0].dagId;
    for (const [i, t] of (await taskClaim(db, 'reviewer', { start: true, dagId: poisonId, limit: 6 })).entries()) {
      await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: i < 4 ? 'timeout' : 'crash', message: `poisoned ${t.key}` });
    }
    await page.click('a[data-nav="dlq"]');
    await page.waitForSelector('form.filters input[name="error_class"]');
    await page.fill('form.filters input[name="error_class"]', 'timeout');
    await page.fill('form.filters input[name="dag_id"]', poisonId);
    await page.click('button[data-action="filters-apply"]');
    await page.waitForSelector('.page-no:text-is("page 1 · 4 shown")', { timeout: LIVE_MS });
    await page.click('button[data-action="bulk-retry"]');
    await page.click('button[data-action="bulk-retry"]');
    await page.waitForSelector('#dlq-bulk-msg:text-is("Retried 4 task(s).")', { timeout: LIVE_MS });
    await page.waitForSelector('.page-no:text-is("page 1 · 0 shown")', { timeout: LIVE_MS });
    const open = await db.execute<{ n: number }>(sql`select count(*)::int as n from dead_letters where dag_id = ${poisonId} and resolution is null`);
    expect(open.rows[0]!.n).toBe(2);

    // 60 more, paged by the server 50 at a time, then cancelled at once from the filter (a note is required).
    const many = await http.call('POST', '/api/dags', {
      raw: ['name: poison-sixty', 'tasks:', ...Array.from({ length: 60 }, (_, i) => `  q${i}: { type: poison, max_attempts: 1 }`)].join('\n'), contentType: 'application/yaml',
    });
    const manyId: string = many.body.results[0].dagId;
    for (const t of await taskClaim(db, 'reviewer', { start: true, dagId: manyId, limit: 60 })) {
      await taskFail(db, { taskId: t.id, fence: t.fence, errorClass: 'crash', message: `poisoned ${t.key}` });
    }
    await page.fill('form.filters input[name="error_class"]', '');
    await page.fill('form.filters input[name="dag_id"]', manyId);
    await page.click('button[data-action="filters-apply"]');
    await page.waitForSelector('.page-no:text-is("page 1 · 50 shown")', { timeout: LIVE_MS });
    await page.click('button[data-action="page-older"]');
    await page.waitForSelector('.page-no:text-is("page 2 · 10 shown")', { timeout: LIVE_MS });
    expect(await page.locator('button[data-action="page-older"]').isDisabled()).toBe(true);
    await page.click('button[data-action="page-newer"]');
    await page.waitForSelector('.page-no:text-is("page 1 · 50 shown")', { timeout: LIVE_MS });
    await page.click('button[data-action="bulk-cancel"]');
    await page.click('button[data-action="bulk-cancel"]');
    await page.waitForSelector('#dlq-bulk-msg:text-is("A note is required to cancel: say why these tasks are given up.")', { timeout: LIVE_MS });
    await page.fill('input[aria-label="bulk note"]', 'the poison batch is obsolete');
    await page.click('button[data-action="bulk-cancel"]');
    await page.click('button[data-action="bulk-cancel"]');
    await page.waitForSelector('#dlq-bulk-msg:text-is("Cancelled 60 task(s).")', { timeout: LIVE_MS });
    await page.waitForSelector('.page-no:text-is("page 1 · 0 shown")', { timeout: LIVE_MS });
    const cancelled = await db.execute<{ resolution: string; note: string; n: number }>(sql`
      select resolution, resolved_note as note, count(*)::int as n from dead_letters where dag_id = ${manyId} group by 1, 2`);
    expect(cancelled.rows).toEqual([{ resolution: 'cancelled', note: 'the poison batch is obsolete', n: 60 }]);
    expect(pageErrors).toEqual([]);
  });
});

describe('a large DAG that does not fold', () => {
  it('3,000 tasks in 1,000 chains: every node drawn in its column (past dagre\'s size), readable at the fitted scale, and a drag pans', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    const chains = Array.from({ length: 1000 }, (_, i) =>
      `  a${i}: { type: t }\n  b${i}: { type: t, depends_on: [a${i}] }\n  c${i}: { type: t, depends_on: [b${i}] }`);
    const r = await http.call('POST', '/api/dags', { raw: ['name: many-chains', 'tasks:', ...chains].join('\n'), contentType: 'application/yaml' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector('table.dags', { timeout: LIVE_MS });
    await page.goto(`${http.url}/#/dags/${encodeURIComponent(r.body.results[0].dagId)}`);
    // Drawing 3,000 nodes (and the page's 500-row table) keeps a loaded machine's browser busy for seconds; the
    // fitted graph is there once the scale is set, however long the browser takes to call it visible.
    await page.waitForSelector('svg.dag-graph[data-scale]', { state: 'attached', timeout: DRAW_3000_MS });
    // No task shares its upstream and downstream with another: nothing folds, and all 3,000 are drawn.
    expect(await page.locator('svg.dag-graph g.node').count()).toBe(3000);
    expect(await page.locator('svg.dag-graph g.node.group').count()).toBe(0);
    expect(await page.locator('svg.dag-graph path.edge').count()).toBe(2000);
    // The column layout: one column per depth, each chain on one row.
    const placed = await page.locator('svg.dag-graph g.node').evaluateAll((gs) => gs.map((g) => {
      const [x, y] = /translate\(([\d.]+) ([\d.]+)\)/.exec(g.getAttribute('transform') ?? '')!.slice(1).map(Number);
      return { key: g.getAttribute('data-key')!, x: x!, y: y! };
    }));
    const at = new Map(placed.map((p) => [p.key, p]));
    expect(new Set(placed.map((p) => p.x)).size).toBe(3);
    for (const i of [0, 500, 999]) {
      const [a, b, c] = ['a', 'b', 'c'].map((k) => at.get(`${k}${i}`)!);
      expect(a!.x < b!.x && b!.x < c!.x).toBe(true);
      expect(new Set([a!.y, b!.y, c!.y]).size).toBe(1);
    }
    // Fitted to the frame's width: three columns fit at full size, so the labels stay readable.
    expect(Number(await page.locator('svg.dag-graph').getAttribute('data-scale'))).toBe(1);
    await expect.poll(() => page.locator('svg.dag-graph g.node[data-key="a0"] .node-key').isVisible(), { timeout: DRAW_3000_MS }).toBe(true);
    // A drag on the space between two columns pans the drawing up.
    const box = (await page.locator('.graph-frame').boundingBox())!;
    const bx = (await page.locator('svg.dag-graph g.node[data-key="a0"] rect').boundingBox())!;
    const startX = bx.x + bx.width + 20;
    const startY = box.y + box.height * 0.6;
    await page.mouse.move(startX, startY);
    await page.mouse.down();
    await page.mouse.move(startX, startY - 150, { steps: 5 });
    await page.mouse.up();
    const translateY = async () => Number(/translate\([-\d.]+px, ([-\d.]+)px\)/.exec((await page.locator('svg.dag-graph').getAttribute('style')) ?? '')?.[1] ?? 0);
    await expect.poll(translateY, { timeout: LIVE_MS }).toBeLessThan(-100);
    await shot('11-many-chains');
  }, 3 * DRAW_3000_MS);
});

describe('a page\'s loads', () => {
  it('a load the network failed is said, tried again, and the DAG shown once the server answers', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    const submitted = await http.call('POST', '/api/dags', { raw: 'name: flaky-network\ntasks:\n  only: { type: t }\n', contentType: 'application/yaml' });
    const dagId: string = submitted.body.results[0].dagId;
    // A new document (the query string), whatever page the tests before left open.
    await page.goto(`${http.url}/?fresh=1#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector('table.dags', { timeout: LIVE_MS });
    // The network fails every load of the DAG until the page has said so: a fixed number of drops could all be
    // spent on loads that a newer one (a live event's refetch) superseded, which never show their failure.
    let failing = true;
    let dropped = 0;
    await page.route(`**/api/dags/${dagId}`, (route) => {
      if (!failing) return route.continue();
      dropped++;
      return route.abort('connectionreset');
    });
    try {
      await page.goto(`${http.url}/#/dags/${encodeURIComponent(dagId)}`);
      await page.waitForSelector('main p.error:has-text("cannot reach the server")', { timeout: LIVE_MS });
      failing = false;
      await page.waitForSelector('g.node[data-key="only"]', { timeout: LIVE_MS });
      expect(dropped).toBeGreaterThanOrEqual(1);
      expect(await page.locator('main p.error').textContent()).toBe('');
    } finally {
      await page.unroute(`**/api/dags/${dagId}`);
    }
  });

  it('a 503 (the database unavailable a moment) is said and tried again, like a dropped connection', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    const submitted = await http.call('POST', '/api/dags', { raw: 'name: db-blip\ntasks:\n  only: { type: t }\n', contentType: 'application/yaml' });
    const dagId: string = submitted.body.results[0].dagId;
    await page.goto(`${http.url}/?fresh=2#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector('table.dags', { timeout: LIVE_MS });
    let unavailable = true;
    await page.route(`**/api/dags/${dagId}`, (route) => unavailable
      ? route.fulfill({ status: 503, headers: { 'retry-after': '1' }, contentType: 'application/json', body: JSON.stringify({ error: { code: 'UNAVAILABLE', message: 'the database is not answering' } }) })
      : route.continue());
    try {
      await page.goto(`${http.url}/#/dags/${encodeURIComponent(dagId)}`);
      await page.waitForSelector('main p.error:has-text("503 UNAVAILABLE")', { timeout: LIVE_MS });
      unavailable = false;
      await page.waitForSelector('g.node[data-key="only"]', { timeout: LIVE_MS });
      expect(await page.locator('main p.error').textContent()).toBe('');
    } finally {
      await page.unroute(`**/api/dags/${dagId}`);
    }
  });

  it('run one at a time, however often a page asks: 3,000 asks during a load make one more load, and every answer is applied in order', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    // (A 3,000-task DAG's creation events each ask for a load; a browser given thousands of fetches at once
    // refuses them all with ERR_INSUFFICIENT_RESOURCES, and the page showed "cannot reach the server".)
    await page.goto(`${http.url}/?fresh=3#token=${encodeURIComponent(http.adminToken)}`);
    await page.waitForSelector('table.dags', { timeout: LIVE_MS });
    // A string, not a function: vitest would rewrite the function's import() for Node.
    const seen: { afterBurst: unknown; started: number; applied: number[] } = await page.evaluate(`(async () => {
      const { pageContext } = await import('/assets/live.js');
      const { api } = await import('/assets/api.js');
      const ctx = pageContext();
      let started = 0;
      const applied = [];
      const load = ctx.refetcher({
        load: async () => {
          const n = ++started;
          await api('GET', '/api/dags?limit=1');
          return n;
        },
        apply: (n) => { applied.push(n); },
      });
      const first = load.now();
      for (let i = 0; i < 3000; i++) void load.now();
      await first;
      const afterBurst = { started, applied: [...applied] };
      await load.now();
      ctx.close();
      return { afterBurst, started, applied };
    })()`);
    expect(seen.afterBurst).toEqual({ started: 2, applied: [1, 2] });
    expect(seen).toMatchObject({ started: 3, applied: [1, 2, 3] });
  });
});
