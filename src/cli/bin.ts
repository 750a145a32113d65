// The `dagent` command: bin/dagent.js runs this file compiled (dist/src/cli/bin.js); the tests run it from the sources.
import { main } from './main.js';

// `dagent … | head` closes stdout early: that is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});
const code = await main(process.argv.slice(2));
// Exit explicitly with the command's code: a finished command must not linger on an open handle.
process.exit(code);
