import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder of dagent's package.json: the checkout when running from the sources, or
 * node_modules/dagent when installed. The migrations, the dashboard's files and the example
 * DAGs ship beside the compiled code, found from here whatever the layout: src/ run by a
 * loader, dist/src/ (ESM) or the bundled dist/cjs/ (CommonJS).
 */
export function packageRoot(): string {
  if (root) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'dagent') return (root = dir);
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`dagent's package.json was not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}
let root: string | undefined;

/** True when dagent runs from its TypeScript sources (tests, development), false from compiled JavaScript. */
export const RUNNING_FROM_SOURCES = import.meta.url.endsWith('.ts');

/** dagent's version, from its package.json. */
export function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  return version;
}
let version: string | undefined;
