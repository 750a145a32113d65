// The `dagent` command: bin/dagent.js runs it bundled (dist/cli/dagent.js, built by scripts/build-cli.mjs), and so do the tests of processes.
import { main } from './main.js';

// `dagent … | head` closes stdout early: that is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});
const code = await main(process.argv.slice(2));
// Exit explicitly with the command's code: a finished command must not linger on an open handle.
process.exit(code);
