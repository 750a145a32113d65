import { describe, expect, it } from 'vitest';
import { jsonForTerminal, terminalSafe, terminalSafeLines } from '../../src/terminal-text.js';

// The process test of every command is test/security/terminal-text.test.ts; this one covers every character.
const codePoints = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String.fromCharCode(from + i));
const UNSAFE = [...codePoints(0x00, 0x1f), ...codePoints(0x7f, 0x9f), '\u2028', '\u2029', ...codePoints(0x202a, 0x202e), ...codePoints(0x2066, 0x2069)];

describe('terminalSafe', () => {
  it('shows every C0 and C1 control, DEL, line separator and bidi override or isolate as a visible escape', () => {
    for (const c of UNSAFE) {
      const shown = terminalSafe(`a${c}b`);
      expect(shown, `U+${c.charCodeAt(0).toString(16)}`).toMatch(/^a\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[nrt])b$/);
    }
    expect(['\x1b', '\x07', '\x08', '\x7f', '\n', '\r', '\t', '\u009b', '\u0085', '\u202e', '\u2066'].map(terminalSafe))
      .toEqual(['\\x1b', '\\x07', '\\x08', '\\x7f', '\\n', '\\r', '\\t', '\\u009b', '\\u0085', '\\u202e', '\\u2066']);
  });

  it('leaves printable text as it is: accents, CJK, emoji, a no-break space, a backslash', () => {
    const text = 'café 東京 🚀\u00a0done C:\\tmp 100% ✔';
    expect(terminalSafe(text)).toBe(text);
  });

  it('keeps the line breaks of text that is several lines by design, and escapes the rest', () => {
    expect(terminalSafeLines('a.yaml:1:1 bad\x1b[2J\nb.yaml:2:3 worse\r')).toBe('a.yaml:1:1 bad\\x1b[2J\nb.yaml:2:3 worse\\r');
  });
});

describe('jsonForTerminal', () => {
  it('writes no character of the set raw, and parses back to the same value', () => {
    const value = { text: UNSAFE.join(''), [`key${'\u202e'}`]: ['\u009b', '\x7f'], n: 1 };
    for (const indent of [undefined, 2]) {
      const json = jsonForTerminal(value, indent);
      expect(json.split('\n').every((line) => UNSAFE.every((c) => !line.includes(c)))).toBe(true);
      expect(JSON.parse(json)).toEqual(value);
    }
    expect(jsonForTerminal('\u009b\u202e\x7f')).toBe('"\\u009b\\u202e\\u007f"');
  });
});

// The dashboard's copy, a plain JS module the browser loads (imported by URL: it has no TypeScript declarations).
const { visibleText, visibleJson } = await import(new URL('../../dashboard/visible-text.js', import.meta.url).href) as {
  visibleText: (text: string) => string; visibleJson: (value: unknown) => string;
};

describe('the dashboard\'s stream text (dashboard/visible-text.js)', () => {
  it('shows the same characters as escapes as dagent stream does, but keeps a tab', () => {
    for (let code = 0; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue;
      const c = String.fromCharCode(code);
      const want = c === '\t' ? '\t' : terminalSafeLines(c);
      if (visibleText(c) !== want) expect(visibleText(c), `U+${code.toString(16)}`).toBe(want);
    }
    expect(visibleText('ok\r\n\t<b>\x1b[31m\u202eevil\\x1b 🚀')).toBe('ok\\r\n\t<b>\\x1b[31m\\u202eevil\\x1b 🚀');
  });

  it('writes JSON as jsonForTerminal does, indented', () => {
    const value = { text: UNSAFE.join(''), [`key${'\u202e'}`]: ['\u009b', '\x7f'], n: 1, html: '<img src=x>' };
    expect(visibleJson(value)).toBe(jsonForTerminal(value, 2));
    expect(JSON.parse(visibleJson(value))).toEqual(value);
  });
});
