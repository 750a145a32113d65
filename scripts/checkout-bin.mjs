// `npm install` in a checkout (the prepare script) links node_modules/.bin/dagent to bin/dagent.js, as npm
// links an installed package's commands: `npx dagent` then finds it at once and runs this checkout's CLI.
// Without the link, npx copies the folder into its own cache as a package, and its first call runs the
// prepare script there (a full build, 30 to 50 s) before the command starts.
import { lstatSync, mkdirSync, readlinkSync, symlinkSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const binDir = path.join(root, 'node_modules/.bin');
const link = path.join(binDir, 'dagent');
const target = path.relative(binDir, path.join(root, 'bin/dagent.js'));

function linkedTo(file) {
  try {
    return lstatSync(file).isSymbolicLink() ? readlinkSync(file) : 'not a link';
  } catch {
    return null;
  }
}

// Only where this package's dependencies are installed (a checkout), never inside another project.
if (path.basename(path.dirname(root)) !== 'node_modules') {
  const current = linkedTo(link);
  if (current !== target) {
    mkdirSync(binDir, { recursive: true });
    if (current !== null) unlinkSync(link);
    symlinkSync(target, link);
  }
}
