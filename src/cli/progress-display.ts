import type { Io } from './output.js';
import { terminalSafe } from '../terminal-text.js';

/**
 * Where a DAG's progress goes: a line per task transition, and a status line kept current. A line carries a
 * failure's message as its agent wrote it: it is made safe for the terminal here (terminal-text.ts).
 */
export interface ProgressDisplay {
  transition(line: string): void;
  status(line: string): void;
  /** The last status stays on screen (or is printed), and the display lets go of the terminal. */
  end(): void;
}

/** How often the status line is printed when it cannot be redrawn in place (not a terminal). */
export const PLAIN_STATUS_EVERY_MS = 10_000;

/** The display for `io`, every line made safe for a terminal before it is shown. */
export async function progressDisplay(io: Io): Promise<ProgressDisplay> {
  const display = await displayOn(io);
  return {
    transition: (line) => display.transition(terminalSafe(line)),
    status: (line) => display.status(terminalSafe(line)),
    end: () => display.end(),
  };
}

/**
 * On a terminal, the status line is redrawn in place under the transitions (log-update); otherwise
 * (a pipe, a file, CI) everything is plain lines: each transition, the status when it changed and
 * at most every PLAIN_STATUS_EVERY_MS, and the last status at the end.
 */
async function displayOn(io: Io): Promise<ProgressDisplay> {
  // A terminal that reports no size (a bare pty) cannot be redrawn in: plain lines there too.
  if (io.terminal && (io.terminal.rows ?? 0) > 0 && (io.terminal.columns ?? 0) > 0) {
    const { createLogUpdate } = await import('log-update');
    const render = createLogUpdate(io.terminal);
    let last = '';
    return {
      transition: (line) => render.persist(line),
      status: (line) => {
        last = line;
        render(line);
      },
      end: () => {
        if (last) render(last);
        render.done();
      },
    };
  }
  let shown = '';
  let pending = '';
  let shownAt = 0;
  return {
    transition: (line) => io.stdout(`${line}\n`),
    status: (line) => {
      pending = line;
      if (line !== shown && Date.now() - shownAt >= PLAIN_STATUS_EVERY_MS) {
        io.stdout(`${line}\n`);
        [shown, shownAt] = [line, Date.now()];
      }
    },
    end: () => {
      if (pending && pending !== shown) io.stdout(`${pending}\n`);
    },
  };
}
