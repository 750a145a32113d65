import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { dagentTableCount } from '../helpers/db.js';
import { describe, expect, it, inject } from 'vitest';
import { nanoid } from 'nanoid';
import { databaseOpen } from '../../src/db/open.js';
import { migrationsApply } from '../../src/db/migrate.js';
import { embeddedServerStart } from '../../src/db/embedded.js';
import { withDatabase } from '../helpers/global-setup.js';

describe('migrations', () => {
  it('are safe when several processes apply them at once', async () => {
    const adminUrl = inject('adminUrl');
    const name = `${inject('dbPrefix')}mig_${nanoid(6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`create database ${name}`);
    try {
      const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: withDatabase(adminUrl, name), max: 1 }));
      // The force-drop below terminates any connection still closing: expected, not a test failure.
      for (const p of pools) p.on('error', () => {});
      await Promise.all(pools.map((p) => migrationsApply(p)));
      const { rows } = await pools[0]!.query(`select count(*)::int as n from dagent.__drizzle_migrations`);
      const tables = await pools[0]!.query(`select table_schema, count(*)::int as n from information_schema.tables where table_schema in ('public', 'dagent', 'drizzle') group by 1`);
      await Promise.all(pools.map((p) => p.end()));
      expect(rows[0].n).toBeGreaterThan(0);
      // Every table in dagent's own schema (the journal too), none in public, no drizzle schema.
      expect(tables.rows).toEqual([{ table_schema: 'dagent', n: await dagentTableCount() }]);
    } finally {
      await admin.query(`drop database ${name} with (force)`);
      await admin.end();
    }
  });
});

describe('embedded PostgreSQL', () => {
  it('a second process-level open of the same data folder joins the running server', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-embedded-'));
    chmodSync(dataDir, 0o755);
    const first = await embeddedServerStart({ dataDir, ephemeral: true });
    try {
      expect(first.owned).toBe(true);
      expect(first.port).not.toBe(5432);
      const second = await databaseOpen({ dataDir });
      expect(second.url).toBe(first.url);
      const { rows } = await second.pool.query('select count(*)::int as n from dags');
      expect(rows[0].n).toBe(0);
      await second.close();
      // The guest's close must not stop the owner's server.
      const c = new pg.Client({ connectionString: first.url });
      await c.connect();
      await c.end();
    } finally {
      await first.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the embedded superuser\'s password', () => {
  it('is random per data folder, kept there readable by its owner only; a cluster with the old fixed one gets a random one at its next start', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-embedded-'));
    chmodSync(dataDir, 0o755);
    const login = async (port: number, password: string) => {
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
      try {
        await c.connect();
        return 'ok';
      } catch (e) {
        return (e as { code?: string }).code;
      } finally {
        await c.end().catch(() => {});
      }
    };
    let server = await embeddedServerStart({ dataDir, ephemeral: true });
    try {
      const file = path.join(dataDir, 'password');
      const password = readFileSync(file, 'utf8').trim();
      expect(password).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(new URL(server.url).password).toBe(password);
      expect(await login(server.port, 'dagent')).toBe('28P01'); // the fixed password of earlier versions opens nothing
      expect(await login(server.port, password)).toBe('ok');

      // As an earlier version left it: the fixed password, no file.
      const c = new pg.Client({ connectionString: server.url });
      await c.connect();
      await c.query(`alter user postgres password 'dagent'`);
      await c.end();
      rmSync(file);
      await server.stop();
      server = await embeddedServerStart({ dataDir, ephemeral: true });
      const rotated = readFileSync(file, 'utf8').trim();
      expect(rotated).not.toBe(password);
      expect(await login(server.port, 'dagent')).toBe('28P01');
      expect(await login(server.port, rotated)).toBe('ok');
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('embedded PostgreSQL started twice at once', () => {
  it('one starter owns the server and the other joins it (start lock)', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-race-'));
    chmodSync(dataDir, 0o755);
    const [a, b] = await Promise.all([embeddedServerStart({ dataDir, ephemeral: true }), embeddedServerStart({ dataDir, ephemeral: true })]);
    try {
      expect([a.owned, b.owned].sort()).toEqual([false, true]);
      expect(a.url).toBe(b.url);
    } finally {
      await (a.owned ? a : b).stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('embedded server folder access', () => {
  it('grants other users traverse-only permission on private folders above a target, nothing more', async () => {
    const { traversalGrant } = await import('../../src/db/embedded.js');
    const { mkdirSync, statSync } = await import('node:fs');
    const top = mkdtempSync(path.join(os.tmpdir(), 'dagent-perm-'));
    const inner = path.join(top, 'private', 'checkout');
    mkdirSync(inner, { recursive: true, mode: 0o700 });
    chmodSync(path.join(top, 'private'), 0o700);
    chmodSync(top, 0o750);
    try {
      traversalGrant([path.join(inner, 'bin')]);
      expect(statSync(top).mode & 0o777).toBe(0o751);
      expect(statSync(path.join(top, 'private')).mode & 0o777).toBe(0o701);
      expect(statSync(inner).mode & 0o777).toBe(0o701);
    } finally {
      rmSync(top, { recursive: true, force: true });
    }
  });
});
