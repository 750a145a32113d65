// The prepare script: npm runs it on `npm install` / `npm ci` in a checkout and before `npm pack`.
// It builds dist/ (scripts/build.mjs), then links node_modules/.bin/dagent (scripts/checkout-bin.mjs).
//
// `npx dagent` in a checkout also runs it: npm installs the folder it stands in as a package into npx's cache
// (linked, not copied) whenever that folder's package.json names the command, and prepares it. That build
// rewrote the dist/ the checkout already had and made the first call take 30 to 50 s; when dist/ is there,
// npx's preparation now leaves it as it is.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const byNpx = process.env.npm_command === 'exec';
if (!(byNpx && existsSync(path.join(root, 'dist/cli/dagent.js')))) {
  execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { stdio: 'inherit' });
}
execFileSync(process.execPath, [path.join(root, 'scripts/checkout-bin.mjs')], { stdio: 'inherit' });
