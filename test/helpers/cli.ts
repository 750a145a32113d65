import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';

/** Run the CLI in-process with this environment, capturing its output and exit code. */
export function cliWith(env: NodeJS.ProcessEnv) {
  return async (...argv: string[]) => {
    let stdout = '';
    let stderr = '';
    const code = await main(argv, { stdout: (s) => { stdout += s; }, stderr: (s) => { stderr += s; }, env });
    return { code, stdout, stderr, json: () => JSON.parse(stdout) };
  };
}

/**
 * `node …CLI_COMPILED, 'submit', …`: the dagent command as users run it, bin/dagent.js running the
 * bundle in dist/cli/, in a child process. A test of a process sees what the bundle does (a module the
 * bundler mangled crashes it, where the sources would have worked); the global setup builds dist/cli/
 * from the sources at the start of every run, so it is never stale. test/package/tarball.test.ts runs
 * the compiled CLI packed and installed.
 */
export const CLI_COMPILED = [fileURLToPath(new URL('../../bin/dagent.js', import.meta.url))];
