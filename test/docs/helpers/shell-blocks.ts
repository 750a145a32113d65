import { readFileSync } from 'node:fs';

/** One command of a doc's shell block, with the output the doc shows under it (console blocks only). */
export interface DocCommand {
  /** `docs/cli.md:62`: the file and the line of the command (its first line when it continues). */
  where: string;
  file: string;
  /** The command as the doc writes it, continuation lines joined with their `\` and newline kept (bash reads them). */
  text: string;
  /** The lines the doc shows as its output, in order; `…` stands for lines left out. */
  output: string[];
}

export interface DocBlock {
  /** `docs/cli.md:62`: the file and the line of the opening fence. */
  where: string;
  file: string;
  commands: DocCommand[];
}

const FENCE_OPEN = /^```(sh|bash|shell|console)\s*$/;

/**
 * The fenced shell blocks of markdown files, as `awk '/^```(sh|bash|shell|console)/…'` lists them: in a console
 * block the lines starting with `$ ` are commands and the others the output of the command above; in an sh, bash or
 * shell block every line that is not blank or a comment is a command. A line ending in `\` continues on the next.
 */
export function docShellBlocks(files: string[]): DocBlock[] {
  const blocks: DocBlock[] = [];
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const open = FENCE_OPEN.exec(lines[i]!);
      if (!open) continue;
      const console = open[1] === 'console';
      const block: DocBlock = { where: `${file}:${i + 1}`, file, commands: [] };
      for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) {
        const line = lines[i]!;
        const isCommand = console ? line.startsWith('$ ') : line.trim() !== '' && !line.trim().startsWith('#');
        if (!isCommand) {
          if (console) block.commands.at(-1)?.output.push(line);
          continue;
        }
        const where = `${file}:${i + 1}`;
        let text = console ? line.slice(2) : line;
        while (/\\$/.test(text) && i + 1 < lines.length) text += `\n${lines[++i]}`;
        block.commands.push({ where, file, text, output: [] });
      }
      blocks.push(block);
    }
  }
  return blocks;
}

/**
 * A line as the doc and a run can both show it: ids, instants, clock times, ages and durations, then any other number,
 * each replaced by a token, runs of blanks as one, and a terminal's `^C` echo dropped. What is left is the line's text
 * and layout: the words, the columns' order, the units and the punctuation.
 */
export function lineShape(line: string): string {
  return line
    .replace(/^\^C/, '')
    .replace(/\b(?:dag|tsk|dlq|whk|tok)_(?:[a-z0-9]+…?|…)/g, '<id>')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z/g, '<instant>')
    .replace(/\d{4}-\d{2}-\d{2}/g, '<day>')
    .replace(/\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b/g, '<clock>')
    .replace(/\b\d+(?:\.\d+)?\s?(?:ms|s|m|h|d)(?: ago)?\b/g, '<duration>')
    .replace(/\d+(?:,\d{3})*(?:\.\d+)?/g, 'N')
    .replace(/\[\s+/g, '[')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Where a run's output lines differ from what the doc shows, or undefined when they agree: the first line shown is the
 * first line printed, and every line shown comes in that order (a `…` line stands for any lines), compared as shapes
 * (lineShape). Blank lines count on neither side.
 */
export function outputMismatch(shown: string[], printed: string[]): string | undefined {
  const want = shown.filter((l) => l.trim() !== '');
  const got = printed.filter((l) => l.trim() !== '').map(lineShape);
  if (want.length === 0) return undefined;
  if (want[0] !== '…' && lineShape(want[0]!) !== got[0]) return `first line: the doc shows\n  ${want[0]}\nthe command printed\n  ${printed.find((l) => l.trim() !== '') ?? '(nothing)'}`;
  let at = 0;
  for (const line of want) {
    if (line.trim() === '…') continue;
    const shape = lineShape(line);
    const found = got.indexOf(shape, at);
    if (found < 0) return `the doc shows\n  ${line}\n(as ${shape})\nwhich the command did not print${at > 0 ? ' after the lines matched before it' : ''}`;
    at = found + 1;
  }
  return undefined;
}
