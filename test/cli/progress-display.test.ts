import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { progressDisplay } from '../../src/cli/progress-display.js';

/** A stand-in for a terminal: what was written, with the width a terminal reports. */
function terminal() {
  let written = '';
  const stream = Object.assign(new Writable({ write(chunk, _enc, done) { written += String(chunk); done(); } }), { isTTY: true, columns: 100, rows: 30 });
  return { stream, written: () => written };
}

// ESC [ … : the cursor and erase sequences a redraw uses.
const ERASE = /\u001b\[2K/;

describe('the progress display', () => {
  it('on a terminal, redraws the status line in place under the transitions, and leaves the last status', async () => {
    const t = terminal();
    const lines: string[] = [];
    const display = await progressDisplay({ stdout: (s) => lines.push(s), stderr: () => {}, env: {}, terminal: t.stream });
    display.status('0/2 done · 1 running');
    display.transition('12:00:00 [1/2] ✔ a completed');
    display.status('1/2 done · 1 running');
    display.status('2/2 done · 0 running');
    display.end();
    const out = t.written();
    expect(lines).toEqual([]); // everything went to the terminal stream
    expect(out).toMatch(ERASE); // earlier status lines were erased, not scrolled
    expect(out).toContain('12:00:00 [1/2] ✔ a completed\n');
    // The transition stays above; the final status is the last thing drawn.
    expect(out.lastIndexOf('2/2 done · 0 running')).toBeGreaterThan(out.lastIndexOf('a completed'));
    expect(out.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '').trimEnd().endsWith('2/2 done · 0 running')).toBe(true);
  });

  it('elsewhere, prints plain lines: each transition, the status at once and then only when it changed after a while, and the last at the end', async () => {
    const lines: string[] = [];
    const display = await progressDisplay({ stdout: (s) => lines.push(s), stderr: () => {}, env: {} });
    display.status('0/2 done');
    display.transition('a completed');
    display.status('1/2 done');
    display.status('2/2 done');
    display.end();
    expect(lines).toEqual(['0/2 done\n', 'a completed\n', '2/2 done\n']);
    expect(lines.join('')).not.toMatch(/\u001b/);
  });

  it('a terminal that reports no size (a bare pty) gets plain lines', async () => {
    const t = terminal();
    Object.assign(t.stream, { rows: 0, columns: 0 });
    const lines: string[] = [];
    const display = await progressDisplay({ stdout: (s) => lines.push(s), stderr: () => {}, env: {}, terminal: t.stream });
    display.status('0/1 done');
    display.end();
    expect([t.written(), lines]).toEqual(['', ['0/1 done\n']]);
  });
});
