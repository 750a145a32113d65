import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { databaseOpen } from '../../src/db/open.js';
import { embeddedServerStart, type EmbeddedServer } from '../../src/db/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A URL on the test server with rights to create databases. */
    adminUrl: string;
    /** Migrated once; every test file clones its own database from it. */
    templateDb: string;
    dbPrefix: string;
  }
}

/**
 * One Postgres for the whole run: DATABASE_URL's server if set, else a throwaway
 * embedded server. The schema is migrated once into a template database.
 * Meanwhile dist/cli/ is built from the sources: the tests of processes run the compiled CLI (CLI_COMPILED).
 */
export default async function setup(project: TestProject) {
  // Held as a value until the server is up: a failed build then stops the server before the run ends.
  const cliBuilt = cliBuild().then(() => null, (e: Error) => e);
  let server: EmbeddedServer | undefined;
  let dataDir: string | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'dagent-test-'));
    chmodSync(dataDir, 0o755); // the postgres system user must reach its data folder inside
    server = await embeddedServerStart({ dataDir, database: 'postgres', ephemeral: true });
    adminUrl = server.url;
  }
  const buildFailure = await cliBuilt;
  if (buildFailure) {
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    throw buildFailure;
  }
  const dbPrefix = `dagent_t${process.pid}_`;
  const templateDb = `${dbPrefix}template`;
  await adminQuery(adminUrl, `drop database if exists ${templateDb}`);
  await adminQuery(adminUrl, `create database ${templateDb}`);
  const template = await databaseOpen({ url: withDatabase(adminUrl, templateDb) });
  await template.close();

  project.provide('adminUrl', adminUrl);
  project.provide('templateDb', templateDb);
  project.provide('dbPrefix', dbPrefix);

  return async () => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    const { rows } = await client.query<{ datname: string }>('select datname from pg_database where datname like $1', [`${dbPrefix}%`]);
    for (const r of rows) await client.query(`drop database if exists ${r.datname} with (force)`);
    await client.end();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  };
}

/**
 * Build the `dagent` bundle at every run (esbuild, ~2 s, beside the server's start), not when it looks
 * older than the sources: no timestamp then decides whether a test runs yesterday's CLI.
 */
async function cliBuild(): Promise<void> {
  const script = fileURLToPath(new URL('../../scripts/build-cli.mjs', import.meta.url));
  await promisify(execFile)(process.execPath, [script]).catch((e: Error & { stderr?: string }) => {
    throw new Error(`building the CLI for the tests failed: ${e.stderr || e.message}`);
  });
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** One statement on a short-lived connection (CREATE/DROP DATABASE cannot run in a pool's transaction). */
export async function adminQuery(url: string, q: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(q);
  } finally {
    await client.end();
  }
}
