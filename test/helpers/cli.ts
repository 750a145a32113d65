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
 * `node …CLI_FROM_SOURCES, 'submit', …`: the dagent command run from the TypeScript sources in a
 * child process, so a test never runs a stale build and shares one copy of dagent with the agent
 * fixtures it loads. test/package/tarball.test.ts runs the compiled, packed one.
 */
export const CLI_FROM_SOURCES = ['--import', 'tsx', 'src/cli/bin.ts'];
