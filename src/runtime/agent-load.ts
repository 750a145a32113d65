import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidInputError } from '../errors.js';
import type { AgentDefinition } from './define-agent.js';

/** Load an agent module: its default export must be `defineAgent({...})`. */
export async function agentModuleLoad(file: string): Promise<AgentDefinition> {
  const full = path.resolve(file);
  if (!existsSync(full)) throw new InvalidInputError(`${file}: no such agent file`);
  const mod = (await import(pathToFileURL(full).href)) as { default?: Partial<AgentDefinition> };
  const def = mod.default;
  if (!def || typeof def.run !== 'function' || typeof def.name !== 'string' || !Array.isArray(def.capabilities)) {
    throw new InvalidInputError(`${file}: the default export is not an agent; write \`export default defineAgent({ name, capabilities, run })\``);
  }
  return def as AgentDefinition;
}
