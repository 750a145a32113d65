// The docs' reference tables are written by hand; these tests hold them to the code.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, EXIT, type ErrorCode } from '../../src/errors.js';

// The docs' tables of error codes are written by hand: they must list what ERROR_CODES defines.
const codes = Object.entries(ERROR_CODES) as Array<[ErrorCode, (typeof ERROR_CODES)[ErrorCode]]>;

/** Rows of the first markdown table after `heading`, as arrays of cells. */
function tableRows(doc: string, after: string): string[][] {
  const from = doc.indexOf(after);
  expect(from, `"${after}" in the doc`).toBeGreaterThanOrEqual(0);
  const lines = doc.slice(from).split('\n');
  const start = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const l of lines.slice(start + 2)) {
    if (!l.startsWith('|')) break;
    rows.push(l.split('|').slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

describe('error codes in the docs', () => {
  it('docs/http-api.md lists every code an HTTP call can return, under its status', () => {
    const rows = tableRows(readFileSync('docs/http-api.md', 'utf8'), '| Status | `error.code` | When |');
    const documented = new Map(rows.flatMap(([status, list]) => [...list!.matchAll(/`([A-Z_]+)`/g)].map((m) => [m[1]!, Number(status)] as const)));
    for (const [code, def] of codes) {
      if (def.status === null) expect(documented.has(code), `${code} is never an HTTP answer`).toBe(false);
      else expect(documented.get(code), code).toBe(def.status);
    }
  });

  it('docs/cli.md names every code the CLI exits with 2 or 3 for in that exit code\'s row', () => {
    const rows = tableRows(readFileSync('docs/cli.md', 'utf8'), '## Exit codes');
    const byExit = new Map(rows.map(([exit, when]) => [Number(exit), when!]));
    for (const [code, def] of codes) {
      if (def.exit === null || def.exit === EXIT.error) continue;
      expect(byExit.get(def.exit), `${code} in the row of exit ${def.exit}`).toContain(`\`${code}\``);
    }
  });
});

describe('limits in the docs', () => {
  it('docs/security.md lists every limit with its default and its variable', async () => {
    const { LIMIT_DEFAULTS, limitEnvName } = await import('../../src/config/limits.js');
    const rows = tableRows(readFileSync('docs/security.md', 'utf8'), '| Limit | Default | Variable | What it bounds |');
    const byName = new Map(rows.map(([name, def, variable]) => [name!.replaceAll('`', ''), { def: Number(def!.replaceAll(',', '')), variable: variable!.replaceAll('`', '') }]));
    for (const [name, value] of Object.entries(LIMIT_DEFAULTS)) {
      expect(byName.get(name), name).toEqual({ def: value, variable: limitEnvName(name as keyof typeof LIMIT_DEFAULTS) });
    }
    expect(byName.size).toBe(Object.keys(LIMIT_DEFAULTS).length);
  });
});
