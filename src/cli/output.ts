import { createRequire } from 'node:module';
import type TableType from 'cli-table3';
import { jsonForTerminal, terminalSafe, terminalSafeLines } from '../terminal-text.js';

// Loaded on the first table, not at start-up (cli-table3 is CommonJS, so a synchronous require does).
const tableClass = (): typeof TableType => createRequire(import.meta.url)('cli-table3') as typeof TableType;

export interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  env: NodeJS.ProcessEnv;
  /** Stdout when it is a terminal (live progress redraws a line there); otherwise unset. */
  terminal?: NodeJS.WritableStream & { columns?: number; rows?: number };
}

export const processIo: Io = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  env: process.env,
  terminal: process.stdout.isTTY ? process.stdout : undefined,
};

/**
 * Prints either JSON (`--json`) or human tables and lines. Each line and each cell is one field's worth of
 * text made safe for a terminal (terminal-text.ts): what an agent wrote in it cannot move the cursor, retitle
 * the window or start a line that looks like the command's own. JSON is escaped as safely, and parses the same.
 */
export class Output {
  constructor(private readonly io: Io, readonly json: boolean) {}

  /** With --json, the value; without, the human rendering. */
  result(value: unknown, human: () => void): void {
    if (this.json) this.io.stdout(`${jsonForTerminal(value, 2)}\n`);
    else human();
  }

  /** One value as one line of JSON (`logs --follow --json`). */
  jsonLine(value: unknown): void {
    this.io.stdout(`${jsonForTerminal(value)}\n`);
  }

  line(s = ''): void {
    this.io.stdout(`${terminalSafe(s)}\n`);
  }

  /** Text as it comes (a stream's), no line added: its line breaks kept, every other control shown as an escape. */
  text(s: string): void {
    this.io.stdout(terminalSafeLines(s));
  }

  /** A blank line, then a heading (`attempts:`) for what follows. */
  section(heading: string): void {
    this.line();
    this.line(heading);
  }

  table(head: string[], rows: Array<Array<string | number | null | undefined>>): void {
    const Table = tableClass();
    const t = new Table({
      head,
      style: { head: [], border: [], compact: true },
      chars: { top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '',
        left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '  ' },
    });
    for (const r of rows) t.push(r.map((c) => (c === null || c === undefined ? '-' : terminalSafe(String(c)))));
    this.io.stdout(`${t.toString()}\n`);
  }
}

export function ago(d: Date | null | undefined): string {
  if (!d) return '-';
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  return `${(s / 3600).toFixed(1)}h ago`;
}

export function usd(n: number | null | undefined): string {
  return n === null || n === undefined ? '-' : `$${n.toFixed(4)}`;
}
