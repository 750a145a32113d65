import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, expect } from 'vitest';
import { main } from '../../src/cli/main.js';
import { dagFileLoad } from '../../src/dag/load.js';
import { DagValidationError } from '../../src/errors.js';
import { testDatabase } from '../helpers/db.js';
import { repoMake, scratchDir } from '../helpers/git-repos.js';
import { databaseSnapshot } from '../helpers/factories.js';
import { CLI_COMPILED } from '../helpers/cli.js';

/**
 * Every file in test/fixtures/bad/ is a plausible DAG with one mistake. Its first
 * line says where dagent must point and what it must say:
 *
 *   # expect: LINE:COL PATH :: MESSAGE-SUBSTRING      (PATH is `-` for YAML syntax errors)
 *
 * Each file must be refused by the loader and by `dagent submit` (exit 2, nothing
 * written) at exactly that place.
 */

const database = await testDatabase();
const { db } = database;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BAD_DIR = path.join(ROOT, 'test/fixtures/bad');
const EXAMPLES_DIR = path.join(ROOT, 'dags/examples');
/** The coding fleet example's repository, inside the file roots the CLI is given. */
const fleetRepo = repoMake(path.join(scratchDir(), 'repo'));
const env = { ...process.env, DATABASE_URL: database.url };
const FLEET_PARAMS = ['--param', `repo=${fleetRepo}`, '--param', 'goal=Validate input'];
/** Where the coding fleet example's repository may be (the one file root its validations are given). */
const FLEET_ENV = { DAGENT_FILE_ROOTS: `.,${path.dirname(fleetRepo)}` };

interface Expectation { line: number; column: number; path: string; message: string }

const EXPECT_LINE = /^# expect: (\d+):(\d+) (\S+) :: (.+)$/;

function expectationOf(file: string): Expectation {
  const first = readFileSync(file, 'utf8').split('\n', 1)[0]!;
  const m = EXPECT_LINE.exec(first);
  if (!m) throw new Error(`${file}: first line is not "# expect: LINE:COL PATH :: MESSAGE": ${first}`);
  return { line: Number(m[1]), column: Number(m[2]), path: m[3] === '-' ? '' : m[3]!, message: m[4]! };
}

/** The file name as dagent prints it (relative to the working directory). */
function printed(file: string): string {
  return path.relative(process.cwd(), file) || file;
}

interface Run { code: number; stdout: string; stderr: string }

async function cli(argv: string[], more: NodeJS.ProcessEnv = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, { stdout: (s) => { stdout += s; }, stderr: (s) => { stderr += s; }, env: { ...env, ...more } });
  return { code, stdout, stderr };
}

/** `dagent …` (the compiled CLI) in a child process; resolves with the exit code instead of rejecting. */
function childCli(argv: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_COMPILED, ...argv], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** The stderr line for the expected problem: `file:LINE:COL path: message…`. */
function locatedLine(stderr: string, file: string, e: Expectation): string | undefined {
  const prefix = `${printed(file)}:${e.line}:${e.column} ${e.path ? `${e.path}: ` : ''}`;
  return stderr.split('\n').find((l) => l.startsWith(prefix) && l.includes(e.message));
}

const badFiles = readdirSync(BAD_DIR).filter((f) => f.endsWith('.yaml')).sort();

describe('bad DAG files', () => {
  it('the corpus has at least 28 files, each with a well-formed expect line and a unique number', () => {
    expect(badFiles.length).toBeGreaterThanOrEqual(28);
    for (const f of badFiles) {
      expect(f).toMatch(/^\d\d-[a-z0-9-]+\.yaml$/);
      expect(() => expectationOf(path.join(BAD_DIR, f))).not.toThrow();
    }
    expect(new Set(badFiles.map((f) => f.slice(0, 2))).size).toBe(badFiles.length);
  });

  describe.each(badFiles)('%s', (name) => {
    const file = path.join(BAD_DIR, name);
    const e = expectationOf(file);
    const where = `${e.line}:${e.column} ${e.path || '-'}`;

    it(`dagFileLoad throws DagValidationError at ${where} :: ${e.message}`, async () => {
      let err: unknown;
      try {
        await dagFileLoad(file);
      } catch (x) {
        err = x;
      }
      expect(err).toBeInstanceOf(DagValidationError);
      const problems = (err as DagValidationError).problems;
      expect(problems).toContainEqual({
        file: printed(file),
        line: e.line,
        column: e.column,
        path: e.path,
        message: expect.stringContaining(e.message),
      });
      // One mistake, one place: no problem is reported anywhere else.
      for (const p of problems) expect(`${p.line}`, `${p.line}:${p.column} ${p.path}: ${p.message}`).toBe(`${e.line}`);
    });

    it('submit exits 2, says nothing was written and leaves the database unchanged', async () => {
      const before = await databaseSnapshot(db);
      const run = await cli(['submit', printed(file)]);
      const after = await databaseSnapshot(db);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(/\d+ problem\(s\); nothing was written/);
      expect(run.stdout).toBe('');
      expect(after).toEqual(before);
    });

    it(`submit prints ${printed(file)}:${e.line}:${e.column} with the message`, async () => {
      const before = await databaseSnapshot(db);
      const run = await cli(['submit', printed(file)]);
      expect(await databaseSnapshot(db)).toEqual(before);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`${printed(file)}:${e.line}:${e.column}`);
      expect(run.stderr).toContain(e.message);
      expect(locatedLine(run.stderr, file, e), run.stderr).toBeDefined();
    });
  });
});

describe('bad DAG files through a real child process', () => {
  it.each(['09-unknown-task-field-typo.yaml', '22-two-cycle.yaml', '46-unknown-param-placeholder.yaml'])(
    'dagent submit %s exits 2 with the located message',
    async (name) => {
      const file = path.join(BAD_DIR, name);
      const e = expectationOf(file);
      const before = await databaseSnapshot(db);
      const run = await childCli(['submit', path.relative(ROOT, file)]);
      expect(run.code, run.stderr).toBe(2);
      const prefix = `${path.relative(ROOT, file)}:${e.line}:${e.column} ${e.path ? `${e.path}: ` : ''}`;
      expect(run.stderr.split('\n').some((l) => l.startsWith(prefix) && l.includes(e.message)), run.stderr).toBe(true);
      expect(run.stderr).toContain('nothing was written');
      expect(await databaseSnapshot(db)).toEqual(before);
    },
  );
});

describe('validate', () => {
  it('exits 2 for a bad file, printing the located problem', async () => {
    const file = path.join(BAD_DIR, '19-unknown-dependency.yaml');
    const e = expectationOf(file);
    const run = await cli(['validate', printed(file)]);
    expect(run.code).toBe(2);
    expect(locatedLine(run.stderr, file, e), run.stderr).toBeDefined();
  });

  const examples = readdirSync(EXAMPLES_DIR).filter((f) => f.endsWith('.yaml')).sort();

  it('there are at least three examples, including code-change (the one with a required param)', () => {
    expect(examples.length).toBeGreaterThanOrEqual(3);
    expect(examples).toContain('code-change.yaml');
  });

  it.each(examples)('exits 0 for dags/examples/%s', async (name) => {
    const params = name === 'code-change.yaml' ? ['--param', 'ticket=X'] : name === 'coding-fleet.yaml' ? FLEET_PARAMS : [];
    const run = await cli(['validate', path.relative(process.cwd(), path.join(EXAMPLES_DIR, name)), ...params], FLEET_ENV);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(': ok (');
  });

  it('exits 0 for all examples at once', async () => {
    const files = examples.map((f) => path.relative(process.cwd(), path.join(EXAMPLES_DIR, f)));
    const run = await cli(['validate', ...files, '--param', 'ticket=X', ...FLEET_PARAMS], FLEET_ENV);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout.trim().split('\n')).toHaveLength(examples.length);
  });
});
