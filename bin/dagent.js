#!/usr/bin/env node
// The CLI runs the TypeScript sources through tsx (a loader), so `npx dagent` never runs a stale build.
import { register } from 'tsx/esm/api';

// `dagent … | head` closes stdout early: that is not an error.
process.stdout.on('error', (e) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});
register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
// Exit explicitly with the command's code: a finished command must not linger on an open handle.
process.exit(code);
