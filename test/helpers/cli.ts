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
