import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { LIVE_MS, testBrowser } from '../helpers/browser.js';
import { rerunPairMade } from '../helpers/rerun-pair.js';

/**
 * A DAG and its rerun with a change in the dashboard (headless Chromium, test/helpers/browser.ts): the rerun's page says
 * what it re-ran and links to the compare page, which sets each task's two runs side by side, outputs as text.
 */
const database = await testDatabase();
const http = await testHttp(database);
const { db } = database;
const { page, launchError, pageErrors, shot } = await testBrowser();

/** An output a careless page would turn into markup. */
const HOSTILE = '<img src=x onerror=window.__pwned=1> polished';

describe('comparing two runs in the dashboard', () => {
  it('links a rerun to its original and to the compare page, which shows each task\'s two runs, reused and unknown costs said so', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    const { first, rerun } = await rerunPairMade(db, {
      agentId: 'w',
      change: { model: 'model-b' },
      first: { output: (k, m) => (k === 'gather' ? { facts: [1, 2] } : `${k} report by ${m}`), spend: () => ({ costUsd: 0.5, tokensIn: 1000, tokensOut: 200 }) },
      second: {
        output: (k, m) => (k === 'polish' ? HOSTILE : `${k} report by ${m}`),
        spend: (k) => (k === 'draft' ? { costUsd: null, tokensIn: 300, tokensOut: 100 } : { costUsd: 0.25, tokensIn: 500, tokensOut: 50 }),
      },
    });

    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.goto(`${http.url}/#/dags/${rerun}`);
    const from = await page.waitForSelector('#dag-rerun-of', { timeout: LIVE_MS });
    expect(await from.textContent()).toContain(`Rerun of ${first} (model model-b): 2 task(s) re-run, 1 reused`);
    await page.waitForSelector('tr[data-key="gather"] .chip:text-is("reused")', { timeout: LIVE_MS });
    await shot('20-rerun');

    await page.click(`#dag-rerun-of a[href="#/compare/${first}/${rerun}"]`);
    await page.waitForSelector('#compare-runs tr[data-side="B"]', { timeout: LIVE_MS });
    const cells = (sel: string) => page.locator(`${sel} td`).allTextContents();
    const runB = await cells('#compare-runs tr[data-side="B"]');
    expect(runB[0]).toContain(`Rerun of ${first} (model model-b)`);
    expect(runB.slice(2)).toEqual(['$0.25 + cost unknown (1 task(s))', '950', expect.stringMatching(/ms|s$/), '2', '3/3 (1 reused)', '1/1']);
    expect(await page.locator('#compare-summary').textContent()).toBe('2 of 3 outputs differ.');

    const side = (key: string, s: 'a' | 'b') => page.locator(`#compare-tasks tr[data-key="${key}"] td[data-side="${s}"]`);
    expect(await side('gather', 'b').textContent()).toContain('The same output as A.');
    expect(await side('gather', 'b').locator('.chip').textContent()).toBe('reused');
    expect(await side('draft', 'b').locator('.cost-unknown').textContent()).toBe('cost unknown');
    expect(await side('draft', 'a').locator('.verdict').textContent()).toBe('regex pass');
    expect(await side('draft', 'a').locator('pre').textContent()).toBe('draft report by model-a');
    // The agent's markup is text: shown as written, never an element, never run.
    expect(await side('polish', 'b').locator('pre').textContent()).toBe(HOSTILE);
    expect(await page.locator('main img').count()).toBe(0);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    await shot('21-compare');

    // The original lists its rerun, with a link to the same comparison.
    await page.goto(`${http.url}/#/dags/${first}`);
    await page.waitForSelector(`#dag-reruns a[href="#/compare/${first}/${rerun}"]`, { timeout: LIVE_MS });
    expect(pageErrors).toEqual([]);
  });
});
