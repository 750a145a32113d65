#!/usr/bin/env node
// Runs the compiled CLI. `npm install` in a checkout builds it (the prepare script); the package ships it built.
import { existsSync } from 'node:fs';
import module from 'node:module';

const entry = new URL('../dist/cli/dagent.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('error: dagent is not built (dist/ is missing); run `npm run build` in its folder\n');
  process.exit(1);
}
// Node 22.1 and later keep the CLI's compiled code on disk (NODE_COMPILE_CACHE, else a folder under the
// system's temp folder), so a later start skips compiling it; docs/benchmarks.md has the figures. Node 20 has
// no such cache and starts as before.
module.enableCompileCache?.();
await import(entry.href);
