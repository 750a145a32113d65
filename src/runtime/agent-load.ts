import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidInputError } from '../errors.js';
import { RUNNING_FROM_SOURCES } from '../package-root.js';
import type { AgentDefinition } from './define-agent.js';

const TYPESCRIPT = /\.[mc]?tsx?$/;

/** Load an agent module: its default export must be `defineAgent({...})`. */
export async function agentModuleLoad(file: string): Promise<AgentDefinition> {
  const full = path.resolve(file);
  if (!existsSync(full)) throw new InvalidInputError(`${file}: no such agent file`);
  if (TYPESCRIPT.test(full)) await typeScriptLoaderRegister(file);
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
