import { createRequire } from 'node:module';
import type { RE2JS as RE2JSClass } from 're2js';
import { LIMITS } from '../config/index.js';

// Loaded on the first pattern, not with the module: it takes ~70 ms to load, and most commands
// compile none (re2js is also CommonJS, so a synchronous require does).
let re2: typeof RE2JSClass | undefined;
const engine = (): typeof RE2JSClass => (re2 ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JSClass }).RE2JS);

/**
 * Every regular expression a DAG author writes (a regex step's pattern, a JSON
 * Schema's `pattern` and `patternProperties`) runs in RE2JS, a linear-time engine:
 * no input can make it backtrack, so no pattern can freeze the event loop (with
 * JavaScript's engine, `(a+)+$` against a few dozen `a`s and a `!` takes seconds).
 * RE2 has no lookaround and no backreferences: a pattern using them is refused at
 * submission, with the reason. Texts longer than LIMITS.regexInputChars never match.
 */
export interface LinearRegex {
  test(text: string): boolean;
  /** `/pattern/flags`: ajv keys its compiled patterns by this. */
  toString(): string;
}

const FLAG_NAMES = { i: 'CASE_INSENSITIVE', m: 'MULTILINE', s: 'DOTALL', u: null } as const;

/** Compile `pattern` (JavaScript syntax, within what RE2 supports) with flags from i, m, s and u. */
export function regexCompile(pattern: string, flags = ''): LinearRegex | { error: string } {
  const RE2JS = engine();
  let bits = 0;
  for (const f of flags) {
    if (!(f in FLAG_NAMES)) return { error: `unsupported flag ${f}: use i, m, s or u` };
    const name = FLAG_NAMES[f as keyof typeof FLAG_NAMES];
    if (name) bits |= RE2JS[name];
  }
  let compiled: RE2JSClass;
  try {
    compiled = RE2JS.compile(fromJavaScriptSyntax(pattern), bits);
  } catch (e) {
    const why = (e as Error).message.replace(/^error parsing regexp: /, '');
    const hint = /\(\?[=!<]|\\[1-9]/.test(pattern) ? ' (lookaround and backreferences are not supported: the engine runs in linear time)' : '';
    return { error: `${why}${hint}` };
  }
  const shown = `/${pattern}/${flags}`;
  return {
    test: (text) => text.length <= LIMITS.regexInputChars && compiled.matcher(text).find(),
    toString: () => shown,
  };
}

/** JavaScript's `\uXXXX` and `\u{…}` escapes in RE2's spelling, `\x{…}`; everything else as written. */
function fromJavaScriptSyntax(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const rest = pattern.slice(i + 1);
    const four = /^u([0-9A-Fa-f]{4})/.exec(rest);
    const braced = /^u\{([0-9A-Fa-f]{1,6})\}/.exec(rest);
    const m = braced ?? four;
    if (m) {
      out += `\\x{${m[1]}}`;
      i += m[0].length;
    } else {
      out += c + (pattern[i + 1] ?? '');
      i++;
    }
  }
  return out;
}
