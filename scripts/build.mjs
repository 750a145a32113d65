// `npm run build` (and `prepare`, which npm runs on install in a checkout and before `npm pack`):
//   dist/src, dist/agents  ESM JavaScript and declarations, by tsc, mirroring the sources;
//   dist/cjs/index.cjs     the public API as one CommonJS file, by esbuild (dependencies stay external,
//                          but nanoid, which is ESM-only, is inlined for Node before 20.19);
//   dist/cjs/ai-sdk.cjs    dagent/ai-sdk, the same way, requiring ./index.cjs for the public API (one copy of its classes);
//   dist/cjs/src/**.d.cts  the same declarations for CommonJS importers;
//   dist/cli/              the `dagent` command, by esbuild (scripts/build-cli.mjs).
// The published declarations hold opaque database handles (src/db/handle.public.d.ts), never drizzle's types.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { cliBuild } from './build-cli.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const INLINED = ['nanoid'];

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
copyFileSync(path.join(root, 'src/db/handle.public.d.ts'), path.join(dist, 'src/db/handle.d.ts'));

await build({
  entryPoints: [path.join(root, 'src/index.ts')],
  outfile: path.join(dist, 'cjs/index.cjs'),
  bundle: true, platform: 'node', format: 'cjs', target: 'node20', logLevel: 'warning',
  external: Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }).filter((d) => !INLINED.includes(d)),
  // import.meta.url has no CommonJS equivalent but the file's own URL.
  define: { 'import.meta.url': 'importMetaUrl' },
  banner: { js: "const importMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
});

// dagent/ai-sdk imports dagent's classes from the public API (src/index.ts): in CommonJS that is ./index.cjs, not a
// second bundled copy, so `instanceof TaskError` holds across the two entry points.
await build({
  entryPoints: [path.join(root, 'src/ai-sdk/index.ts')],
  outfile: path.join(dist, 'cjs/ai-sdk.cjs'),
  bundle: true, platform: 'node', format: 'cjs', target: 'node20', logLevel: 'warning',
  external: Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }),
  plugins: [{
    name: 'public-api-external',
    setup(b) {
      b.onResolve({ filter: /^\.\.\/index\.js$/ }, () => ({ path: './index.cjs', external: true }));
    },
  }],
});

/** Every declaration file under `dir`, as paths relative to it. */
function declarations(dir, rel = '') {
  return readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => e.isDirectory()
    ? declarations(dir, path.join(rel, e.name))
    : e.name.endsWith('.d.ts') ? [path.join(rel, e.name)] : []);
}
for (const file of declarations(path.join(dist, 'src'))) {
  const target = path.join(dist, 'cjs/src', file.replace(/\.d\.ts$/, '.d.cts'));
  mkdirSync(path.dirname(target), { recursive: true });
  // Relative specifiers name the .cjs twin, so TypeScript reads these as CommonJS declarations.
  const text = readFileSync(path.join(dist, 'src', file), 'utf8').replace(/((?:from |import\()\s*['"]\.{1,2}\/[^'"]*?)\.js(['"])/g, '$1.cjs$2');
  writeFileSync(target, text);
}

// The `dagent` command (dist/cli/), bundled by esbuild.
await cliBuild();
