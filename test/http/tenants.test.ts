import { beforeEach, describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';
import { testHttp } from '../helpers/http.js';
import { databaseReset, databaseSnapshot } from '../helpers/factories.js';
import { tokenCreate } from '../../src/auth/tokens.js';
import { tenantCreate } from '../../src/engine/ops/tenants.js';

// Tenants over HTTP: an admin of every tenant makes and changes them (as `dagent tenants` does); readers list them,
// a token scoped to tenants its own only; a scoped admin may not make or change any.
const database = await testDatabase();
const { db } = database;
const http = await testHttp(database);
beforeEach(() => databaseReset(db));

describe('tenants over HTTP', () => {
  it('an admin makes a tenant and changes its weight and quotas; a bad value is a 400 naming it and changes nothing', async () => {
    const made = await http.call('POST', '/api/tenants', { body: { id: 'team-a', name: 'Team A', weight: 2, max_usd_per_day: 5 } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.tenant).toMatchObject({ id: 'team-a', name: 'Team A', weight: 2, maxUsdPerDay: 5, maxRunning: null });
    expect((await http.call('POST', '/api/tenants', { body: { id: 'team-a' } })).status).toBe(409);

    const set = await http.call('POST', '/api/tenants/team-a', { body: { weight: 3, max_running: 4, max_usd_per_day: null } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.tenant).toMatchObject({ weight: 3, maxRunning: 4, maxUsdPerDay: null });

    const before = await databaseSnapshot(db);
    for (const [path, body, field] of [
      ['/api/tenants/team-a', { weight: 0 }, 'weight'], ['/api/tenants/team-a', { max_tokens_per_minute: 1.5 }, 'max_tokens_per_minute'],
      ['/api/tenants', { id: 'Bad Id' }, 'body.id'], ['/api/tenants/team-a', { colour: 'red' }, 'body'],
    ] as const) {
      const r = await http.call('POST', path, { body });
      expect([r.status, r.body.error.code], JSON.stringify(r.body)).toEqual([400, 'INVALID_INPUT']);
      expect(r.body.error.message).toContain(field);
    }
    expect((await http.call('POST', '/api/tenants/ghost', { body: { weight: 2 } })).status).toBe(404);
    expect(await databaseSnapshot(db)).toBe(before);
  });

  it('readers list the tenants (a scoped one its own); only an admin of every tenant makes or changes one', async () => {
    await tenantCreate(db, { id: 'team-a' });
    await tenantCreate(db, { id: 'team-b' });
    const all = await http.call('GET', '/api/tenants');
    expect(all.body.tenants.map((t: { id: string }) => t.id)).toEqual(['default', 'team-a', 'team-b']);

    const { token: reader } = await tokenCreate(db, { role: 'read', tenants: ['team-a'] });
    const mine = await http.call('GET', '/api/tenants', { token: reader });
    expect(mine.body.tenants.map((t: { id: string }) => t.id)).toEqual(['team-a']);

    const { token: scopedAdmin } = await tokenCreate(db, { role: 'admin', tenants: ['team-a'] });
    const before = await databaseSnapshot(db);
    for (const [token, path, body] of [
      [scopedAdmin, '/api/tenants', { id: 'team-c' }], [scopedAdmin, '/api/tenants/team-a', { weight: 10 }], [reader, '/api/tenants', { id: 'team-c' }],
    ] as const) {
      const r = await http.call('POST', path, { token, body });
      expect([r.status, r.body.error.code], JSON.stringify(r.body)).toEqual([403, 'FORBIDDEN']);
    }
    expect(await databaseSnapshot(db)).toBe(before);
  });
});
