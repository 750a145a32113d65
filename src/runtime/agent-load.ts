import { existsSync } from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidInputError } from '../errors.js';
import { packageRoot, RUNNING_FROM_SOURCES } from '../package-root.js';
import type { AgentDefinition } from './define-agent.js';

const TYPESCRIPT = /\.[mc]?tsx?$/;

/** Load an agent module: its default export must be `defineAgent({...})`. */
export async function agentModuleLoad(file: string): Promise<AgentDefinition> {
  const full = path.resolve(file);
  if (!existsSync(full)) throw new InvalidInputError(`${file}: no such agent file`);
  if (TYPESCRIPT.test(full)) await typeScriptLoaderRegister(file);
  sourceApiToBundleRedirect();
  const mod = (await import(pathToFileURL(full).href)) as { default?: Partial<AgentDefinition> };
  const def = mod.default;
  if (!def || typeof def.run !== 'function' || typeof def.name !== 'string' || !Array.isArray(def.capabilities)) {
    throw new InvalidInputError(`${file}: the default export is not an agent; write \`export default defineAgent({ name, capabilities, run })\``);
  }
  return def as AgentDefinition;
}

let registered = RUNNING_FROM_SOURCES; // the sources already run under a loader

/**
 * Node 20 cannot import TypeScript by itself: a .ts agent module loads through tsx, an optional
 * peer dependency (the compiled CLI needs no loader otherwise). JavaScript agent modules need nothing.
 */
async function typeScriptLoaderRegister(file: string): Promise<void> {
  if (registered) return;
  let api: { register(): unknown };
  try {
    api = (await import('tsx/esm/api')) as typeof api;
  } catch {
    throw new InvalidInputError(`${file}: a TypeScript agent module needs the tsx loader; install it beside dagent (npm install --save-dev tsx), or compile the agent to JavaScript`);
  }
  api.register();
  registered = true;
}

let redirected = RUNNING_FROM_SOURCES; // from the sources, an agent's import of them is the same module already

/**
 * Run by the compiled CLI (dist/cli/, beside its public API bundle api.js and the hooks module): an agent's
 * import of dagent's sources (src/index.ts, as agents in a checkout import it) or of the installed package's
 * ESM entry gets the CLI's own bundled API (agent-resolve-hooks.ts says why). Registered after the TypeScript
 * loader, so it sees what that resolved.
 */
function sourceApiToBundleRedirect(): void {
  if (redirected) return;
  redirected = true;
  const here = new URL('.', import.meta.url);
  const api = new URL('api.js', here);
  const hooks = new URL('agent-resolve-hooks.js', here);
  if (!existsSync(api) || !existsSync(hooks)) return; // not the CLI bundle (dist/src/ run by a program of its own)
  const sources = path.join(packageRoot(), 'src/index');
  // And the installed package's ESM entry (an agent in a project imports `dagent`): the same API, compiled alike.
  const compiled = pathToFileURL(path.join(packageRoot(), 'dist/src/index.js')).href;
  // Node 20.6 and later; before, the agent loads the sources as it always did.
  if (typeof module.register !== 'function') return;
  module.register(hooks, { data: { from: [pathToFileURL(`${sources}.ts`).href, pathToFileURL(`${sources}.js`).href, compiled], to: api.href } });
}
