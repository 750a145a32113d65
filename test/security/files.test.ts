import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nanoid } from 'nanoid';
import { testDatabase } from '../helpers/db.js';
import { databaseSnapshot } from '../helpers/factories.js';
import { innocentBystander } from './helpers/innocent.js';
import { serverStart } from './helpers/server.js';

// Finding 2: a schema_file path made the server read any file it could (its content came
// back in the error), /dev/zero exhausted its memory and a FIFO blocked its event loop.
// Paths now stay inside the project (the DAG's directory, or for a posted DAG the server's
// working directory, and DAGENT_FILE_ROOTS), name regular files only, and no error quotes them.
const database = await testDatabase();
const server = await serverStart(database);
const DIR = path.resolve('test/.tmp', `files-${nanoid(6)}`);
mkdirSync(DIR, { recursive: true });
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
const rel = (f: string) => path.relative(process.cwd(), path.join(DIR, f));

const withSchemaFile = (file: string) => `name: files\ntasks:\n  t: { type: w, output: { validation: { kind: json-schema, schema_file: "${file}" } } }\n`;

async function refusedQuietly(file: string, why: RegExp) {
  const before = await databaseSnapshot(database.db);
  const r = await server.call('POST', '/api/dags', { raw: withSchemaFile(file), contentType: 'application/yaml', timeoutMs: 15_000 });
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect(r.body.error.code).toBe('DAG_INVALID');
  expect(r.body.error.message).toMatch(why);
  // Nothing of what the file holds comes back.
  expect(JSON.stringify(r.body)).not.toMatch(/root:|SECRET|hunter2/);
  expect(await databaseSnapshot(database.db)).toBe(before);
}

describe('paths in a DAG stay inside the project', () => {
  it('absolute paths and ../ escapes are refused without reading the file', async () => {
    const innocent = await innocentBystander(server, database, 'beside-files');
    await refusedQuietly('/etc/passwd', /schema file \/etc\/passwd is outside the DAG's directory/);
    await refusedQuietly('../../../../../../../../etc/passwd', /is outside the DAG's directory/);
    await refusedQuietly('/dev/zero', /is outside the DAG's directory/);
    await innocent.finish();
  });

  it('a symlink inside the project that points outside it is refused', async () => {
    symlinkSync('/etc/passwd', path.join(DIR, 'passwd-link.json'));
    await refusedQuietly(rel('passwd-link.json'), /is outside the DAG's directory/);
  });

  it('a FIFO inside the project is refused at once as not a regular file (no writer is waited for), and the server keeps answering', async () => {
    execFileSync('mkfifo', [path.join(DIR, 'pipe.json')]);
    await refusedQuietly(rel('pipe.json'), /is not a regular file/);
    expect((await server.call('GET', '/healthz', { token: null, timeoutMs: 5_000 })).status).toBe(200);
  });

  it('a file over the size cap is refused before it is read', async () => {
    writeFileSync(path.join(DIR, 'big.json'), `{"description": "${'x'.repeat(1_200_000)}"}`);
    await refusedQuietly(rel('big.json'), /is larger than 1048576 bytes/);
  });

  it('a file that is not a schema is refused by line and column, without quoting it', async () => {
    writeFileSync(path.join(DIR, 'env.json'), 'SECRET=hunter2\n{ broken: [ yaml\n');
    await refusedQuietly(rel('env.json'), /is neither JSON nor YAML \(line \d+, column \d+\)/);
    writeFileSync(path.join(DIR, 'scalar.json'), 'SECRET=hunter2\n');
    await refusedQuietly(rel('scalar.json'), /must hold a JSON Schema object/);
  });

  it('a schema file inside the project is read and enforced', async () => {
    writeFileSync(path.join(DIR, 'ok.json'), JSON.stringify({ type: 'object', required: ['ok'] }));
    const r = await server.call('POST', '/api/dags', { raw: withSchemaFile(rel('ok.json')), contentType: 'application/yaml' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  });
});
