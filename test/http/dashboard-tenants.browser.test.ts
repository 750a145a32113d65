import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { LIVE_MS, testBrowser } from '../helpers/browser.js';
import { dagSpec } from '../helpers/factories.js';
import { dagSubmit } from '../../src/engine/dag/submit.js';
import { tenantCreate, tenantSet } from '../../src/engine/ops/tenants.js';
import { tokenCreate } from '../../src/auth/tokens.js';

/**
 * Tenants in the dashboard (headless Chromium): the Agents page sets each tenant's share of the weights beside the
 * share it was served and why its work waits; the DAG list filters by tenant; a token scoped to a tenant sees its own
 * DAGs only, and its Agents page works without the deployment's rate limits (which it may not read).
 */
const database = await testDatabase();
const http = await testHttp(database);
const { db } = database;
const { page, launchError, pageErrors } = await testBrowser();

/** A tenant name a careless page would turn into markup. */
const HOSTILE = '<img src=x onerror=window.__pwned=1> Team A';

describe('tenants in the dashboard', () => {
  it('shows the tenants\' shares and quotas, filters DAGs by tenant, and shows a scoped token its own tenant\'s DAGs only', async () => {
    expect(launchError?.message, 'the npm-provided Chromium (@sparticuz/chromium) did not start').toBeUndefined();
    await tenantCreate(db, { id: 'team-a', weight: 3, name: HOSTILE });
    await tenantCreate(db, { id: 'team-b' });
    await tenantSet(db, 'team-b', { maxRunning: 1 });
    for (const t of ['team-a', 'team-b']) {
      await dagSubmit(db, [await dagSpec(`name: work-of-${t}\ntasks:\n  x: { type: t }\n  y: { type: t }\n`)], { tenant: t });
    }

    await page.goto(`${http.url}/#token=${encodeURIComponent(http.adminToken)}`);
    await page.goto(`${http.url}/#/agents`);
    const row = (id: string) => page.locator(`#tenants tr[data-tenant="${id}"] td`);
    await page.waitForSelector('#tenants tr[data-tenant="team-a"]', { timeout: LIVE_MS });
    // Weights 1 (default), 3 and 1: team-a's share is 60 %; nothing was served yet.
    const a = await row('team-a').allTextContents();
    expect(a.slice(1, 6)).toEqual(['60.0 %', '0.0 %', '0', '2', '0']);
    expect(await row('team-a').first().locator('.muted').textContent()).toBe(HOSTILE);
    expect(await page.locator('main img').count()).toBe(0);
    expect((await row('team-b').allTextContents())[1]).toBe('20.0 %');

    // The DAG list, filtered to team-b: its DAG only, marked with its tenant.
    await page.goto(`${http.url}/#/`);
    await page.waitForSelector('tr[data-dag-id]', { timeout: LIVE_MS });
    expect(await page.locator('tr[data-dag-id]').count()).toBe(2);
    await page.fill('form.filters input[name="tenant"]', 'team-b');
    await page.press('form.filters input[name="tenant"]', 'Enter');
    await page.waitForSelector('tr[data-dag-id] [data-tenant]', { timeout: LIVE_MS });
    await expect.poll(() => page.locator('tr[data-dag-id]').count(), { timeout: LIVE_MS }).toBe(1);
    expect(await page.locator('tr[data-dag-id] a').first().textContent()).toBe('work-of-team-b');
    expect(await page.locator('tr[data-dag-id] [data-tenant]').textContent()).toBe('tenant team-b');

    // A reader scoped to team-a: its DAG only, and its Agents page (no rate limits for it, one tenant: no shares card).
    const { token } = await tokenCreate(db, { role: 'read', tenants: ['team-a'] });
    await page.goto(`${http.url}/#token=${encodeURIComponent(token)}`);
    await page.goto(`${http.url}/#/`);
    await page.waitForSelector('tr[data-dag-id]', { timeout: LIVE_MS });
    expect(await page.locator('tr[data-dag-id] a').allTextContents()).toEqual(['work-of-team-a']);
    await page.goto(`${http.url}/#/agents`);
    await page.waitForSelector('main h1:text-is("Agents")', { timeout: LIVE_MS });
    await page.waitForSelector('main .empty, main table.agents', { timeout: LIVE_MS });
    expect(await page.locator('#tenants').isHidden()).toBe(true);
    expect(await page.locator('main').textContent()).not.toContain('team-b');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(pageErrors).toEqual([]);
  });
});
