/**
 * Module resolution hooks for agent modules run by the compiled CLI (registered by agent-load.ts). An agent in
 * dagent's checkout imports dagent by its source path (`../src/index.js`); the TypeScript loader would compile
 * the whole source tree for it at every agent process's start (2 to 2.5 s of CPU) and give the agent a second
 * copy of every module the CLI already runs (its own TaskError, defineAgent, …). The hook resolves that one
 * file to the CLI bundle's public API (dist/cli/api.js), built from the same sources in the same build. An
 * agent that imports the installed package (`dagent`) is resolved by Node as usual.
 */
interface HookData { from: string[]; to: string }
type NextResolve = (specifier: string, context: unknown) => Promise<{ url: string; format?: string | null }>;

let redirect: HookData = { from: [], to: '' };

export function initialize(data: HookData): void {
  redirect = data;
}

export async function resolve(specifier: string, context: unknown, next: NextResolve): Promise<{ url: string; format?: string | null; shortCircuit?: boolean }> {
  const resolved = await next(specifier, context);
  return redirect.from.includes(resolved.url) ? { url: redirect.to, format: 'module', shortCircuit: true } : resolved;
}
