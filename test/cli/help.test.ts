import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMAND_MODULES } from '../../src/cli/commands.js';
import { commandContext } from '../../src/cli/context.js';
import { programBuild } from '../../src/cli/main.js';
import { cliWith } from '../helpers/cli.js';

const io = { stdout: () => {}, stderr: () => {}, env: {} };

/** Every command under `c`, with its path (`dlq retry`). */
function commandsUnder(c: Command, prefix = ''): Array<{ path: string; command: Command }> {
  return c.commands.flatMap((sub) => {
    const path = `${prefix}${sub.name()}`;
    return [{ path, command: sub }, ...commandsUnder(sub, `${path} `)];
  });
}

describe('help', () => {
  it('the top-level help, which loads no command module, shows each command with the description its module gives it', async () => {
    const full = await programBuild(commandContext(io), [], { all: true });
    const registered = Object.fromEntries(full.commands.map((c) => [c.name(), c.description()]));
    const listed = Object.fromEntries(COMMAND_MODULES.flatMap((m) => Object.entries(m.commands)));
    expect(listed).toEqual(registered);
    const help = await cliWith({})('--help');
    expect(help.code).toBe(0);
    for (const name of Object.keys(registered)) expect(help.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
  });

  it('every command, and every option of every command, has help text', async () => {
    const full = await programBuild(commandContext(io), [], { all: true });
    const missing: string[] = [];
    for (const { path, command } of commandsUnder(full)) {
      if (!command.description().trim()) missing.push(`${path}: no description`);
      for (const o of command.options) if (!o.description.trim()) missing.push(`${path} ${o.flags}: no description`);
    }
    expect(missing).toEqual([]);
  });

  it('an unknown command is refused with a suggestion from the one-line list', async () => {
    const typo = await cliWith({})('sbumit');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/unknown command 'sbumit'[\s\S]*Did you mean submit\?/);
  });
});
