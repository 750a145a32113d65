#!/usr/bin/env node
// The CLI runs the TypeScript sources through tsx (a loader), so `npx dagent` never runs a stale build.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
