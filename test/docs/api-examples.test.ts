import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../helpers/db.js';

const run = promisify(execFile);
const database = await testDatabase();

// docs/api.md promises that each example compiles against the public API, and that the first runs.
const DIR = path.resolve('test/.api-examples');
const blocks = [...readFileSync('docs/api.md', 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);

/**
 * What `tsc -p` on the examples' tsconfig reports about the examples themselves: the same program (every file the
 * examples reach through src/index.ts), with the semantic and declaration diagnostics asked of the example files
 * only. `tsc -p` would also check the body of every file of src/ (5 s of its 8 s on 2 cores); `npm run typecheck`
 * does that, and the examples are still checked, in full, against what src/ declares.
 */
function examplesTypeErrors(): string {
  const parsed = ts.getParsedCommandLineOfConfigFile(path.join(DIR, 'tsconfig.json'), {}, {
    ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')); },
  })!;
  const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options, configFileParsingDiagnostics: parsed.errors });
  const examples = parsed.fileNames.map((f) => program.getSourceFile(f) ?? expect.fail(`${f} is not in the program`));
  const diagnostics = [
    ...program.getConfigFileParsingDiagnostics(), ...program.getOptionsDiagnostics(), ...program.getSyntacticDiagnostics(), ...program.getGlobalDiagnostics(),
    ...examples.flatMap((f) => [...program.getSemanticDiagnostics(f), ...program.getDeclarationDiagnostics(f)]),
  ];
  return ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' });
}

function examplesWrite(): string[] {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  const files = blocks.map((code, i) => {
    const file = path.join(DIR, `example-${i + 1}.ts`);
    // Each block is a module of its own; 'dagent' is this checkout's public entry point.
    writeFileSync(file, `${code.replaceAll("from 'dagent'", "from '../../src/index.js'").replaceAll("from 'dagent/ai-sdk'", "from '../../src/ai-sdk/index.js'")}\nexport {};\n`);
    return file;
  });
  writeFileSync(path.join(DIR, 'tsconfig.json'), JSON.stringify({
    extends: '../../tsconfig.json', compilerOptions: { noEmit: true, rootDir: '../..' }, include: ['*.ts'],
  }));
  return files;
}

describe('docs/api.md', () => {
  it('has an example for every group of the public API, and each one type-checks against src/index.ts', async () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    const index = readFileSync('src/index.ts', 'utf8') + readFileSync('src/ai-sdk/index.ts', 'utf8');
    const exported = [...index.matchAll(/export (?:type )?\{([^}]*)\}/g)].flatMap((m) => m[1]!.split(',').map((n) => n.replace(/\btype\b/, '').trim())).filter(Boolean);
    const doc = readFileSync('docs/api.md', 'utf8');
    // Every name src/index.ts and src/ai-sdk/index.ts (dagent/ai-sdk) export by name is listed on the page.
    for (const name of exported) expect(doc, name).toContain(`\`${name}\``);
    examplesWrite();
    expect(examplesTypeErrors()).toBe('');
  }, 120_000);

  it('the embedding example runs end to end: the DAG completes with the agent\'s outputs', async () => {
    const [first] = examplesWrite();
    const { stdout } = await run(process.execPath, ['--import', 'tsx', first!], {
      env: { ...process.env, DATABASE_URL: database.url, DAGENT_LOG_LEVEL: 'warn' }, timeout: 60_000,
    });
    expect(stdout.trim()).toBe('completed [["hello",{"who":"world"}],["shout",{"who":"WORLD"}]]');
  }, 90_000);
});
