// @ts-check
// Agents' text as the dashboard shows it in a stream: every character that is not text to read shown as a visible
// escape, as `dagent stream` prints it (src/terminal-text.ts terminalSafeLines and jsonForTerminal, which this
// copies: the dashboard imports nothing from the server), except that a tab stays a tab (a browser only indents it).
// Inserted as text, HTML is never parsed anyway; this is about what a reader sees: an ANSI colour code shows as
// `\x1b[31m` rather than an invisible character, a bidi override (U+202E, "Trojan Source") as `\u202e` rather than
// text reordered to say something else. test/cli/terminal-text.test.ts holds the two to the same characters.

/**
 * C0 controls but the newline and the tab, DEL, C1 controls, the Unicode line and paragraph separators, and the
 * bidirectional embeddings, overrides and isolates.
 */
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same set less the C0 controls, which JSON.stringify already writes as `\n`, `\u001b`, … */
const HIDDEN_IN_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** @param {string} c */
const unicodeEscape = (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * `text` with its line breaks and tabs kept and every other hidden character shown as an escape (`\x1b`, `\r`,
 * `\u202e`); a backslash stays as it is.
 * @param {string} text
 */
export function visibleText(text) {
  return text.replace(HIDDEN, (c) => {
    if (c === '\r') return '\\r';
    const code = c.charCodeAt(0);
    return code <= 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : unicodeEscape(c);
  });
}

/**
 * `value` as indented JSON with no hidden character written raw: each as its `\uXXXX` escape, so the text still
 * parses to the same value.
 * @param {unknown} value
 */
export function visibleJson(value) {
  return String(JSON.stringify(value, null, 2)).replace(HIDDEN_IN_JSON, unicodeEscape);
}
