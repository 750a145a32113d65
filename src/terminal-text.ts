/**
 * What the CLI prints to an operator's terminal holds text agents wrote: log lines, failure messages, a
 * provider's rate-limit message, outputs, an agent's type, a judge's reasons. A terminal takes control
 * characters in that text as commands (clear the screen, move the cursor, set the window title, write the
 * clipboard with OSC 52), and a newline in one field reads as a line of the command's own. So every string a
 * command prints passes through here and reaches the terminal as data, each such character shown as a visible
 * escape (`\x1b`, `\n`, `\u009b`): output.ts does it for every line, table cell and `--json` document,
 * progress-display.ts for `watch`'s lines, main.ts for error messages.
 */

/**
 * C0 controls (newline and tab too: a field stays on its line), DEL, C1 controls (U+0080–U+009F: U+009B is a
 * CSI by itself to a terminal that takes 8-bit controls, U+0085 a newline to some), the Unicode line and paragraph
 * separators, and the bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), which
 * reorder how the rest of the line reads ("Trojan Source", CVE-2021-42574). A backslash is left as it is: an
 * agent that writes `\x1b` as text is shown the same four characters, and nothing reaches the terminal either way.
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** The same set less the C0 controls, which JSON.stringify already writes as `\n`, `\u001b`, … */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `text` with every character a terminal would act on shown as an escape; the result is one line. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => NAMED[c] ?? escapeOf(c));
}

/** Text that is several lines by design (an error with its problems, a stack): each line made safe, the line breaks kept. */
export function terminalSafeLines(text: string): string {
  return text.split('\n').map(terminalSafe).join('\n');
}

/**
 * `value` as JSON (`--json`) that is as safe on a terminal. JSON.stringify escapes the C0 controls but writes
 * DEL, the C1 controls and the bidi characters as they are; in JSON text these can stand only inside a string,
 * where `\uXXXX` is the same character, so the document still parses to exactly the same value.
 */
export function jsonForTerminal(value: unknown, indent?: number): string {
  return String(JSON.stringify(value, null, indent)).replace(UNSAFE_IN_JSON, unicodeEscape);
}

function escapeOf(c: string): string {
  const code = c.charCodeAt(0);
  return code <= 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : unicodeEscape(c);
}

function unicodeEscape(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}
