#!/usr/bin/env node
// Runs the compiled CLI. `npm install` in a checkout builds it (the prepare script); the package ships it built.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/dagent.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('error: dagent is not built (dist/ is missing); run `npm run build` in its folder\n');
  process.exit(1);
}
await import(entry.href);
