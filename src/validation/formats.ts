import { createRequire } from 'node:module';
import type { Format } from 'ajv';
import { regexCompile } from './regex-engine.js';

/**
 * The `format` keyword's checks, from ajv-formats (its full mode), made safe to run
 * on what an agent sends: every check that is a regular expression runs in the
 * linear-time engine, as a DAG author's patterns do. ajv-formats' own regexes run in
 * JavaScript's backtracking engine, and its `url` takes seconds on an output of a
 * few tens of kilobytes (`http://` and 80,000 colons: 12 s, quadratic).
 *
 * Three of its regexes use lookaround, which RE2 lacks; each is rewritten here as the
 * lookaround-free regex plus the plain check the lookaround made. The checks that are
 * functions (dates, times, `uri`, `regex`, the number ranges) stay: they were measured
 * linear on 80,000-character inputs built to make their regexes backtrack.
 */

function linear(source: string, flags: string): (s: string) => boolean {
  const compiled = regexCompile(source, flags);
  if ('error' in compiled) throw new Error(`format regex /${source}/${flags} does not run in the linear engine: ${compiled.error}`);
  return (s) => compiled.test(s);
}

const IPV4_PRIVATE_HOST = String.raw`(?:(?:10|127)(?:\.\d{1,3}){3}|(?:169\.254|192\.168)(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})`;

/** The three lookaround regexes, each as its lookaround-free regex and the check the lookaround made. */
const rewritten = (): Record<string, (s: string) => boolean> => {
  const url = linear(String.raw`^(?:https?|ftp):\/\/(?:\S+(?::\S*)?@)?(?:(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))|(?:(?:[a-z0-9\u{00a1}-\u{ffff}]+-)*[a-z0-9\u{00a1}-\u{ffff}]+)(?:\.(?:[a-z0-9\u{00a1}-\u{ffff}]+-)*[a-z0-9\u{00a1}-\u{ffff}]+)*(?:\.(?:[a-z\u{00a1}-\u{ffff}]{2,})))(?::\d{2,5})?(?:\/[^\s]*)?$`, 'iu');
  // ajv-formats refuses a private IPv4 host (its negative lookaheads before the address).
  const urlPrivate = linear(String.raw`^(?:https?|ftp):\/\/(?:\S+(?::\S*)?@)?${IPV4_PRIVATE_HOST}`, 'iu');
  const hostname = linear(String.raw`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[-0-9a-z]{0,61}[0-9a-z])?)*\.?$`, 'i');
  const duration = linear(String.raw`^P((\d+Y)?(\d+M)?(\d+D)?(T(\d+H)?(\d+M)?(\d+S)?)?|(\d+W)?)$`, '');
  return {
    url: (s) => url(s) && !urlPrivate(s),
    // (?=.{1,253}\.?$): at most 253 characters, not counting a trailing dot.
    hostname: (s) => s.replace(/\.$/, '').length <= 253 && s.length >= 1 && hostname(s),
    // (?!$) after P: not "P" alone; T(?=\d): a T is followed by a digit, so it does not end the text.
    duration: (s) => s !== 'P' && !s.endsWith('T') && duration(s),
  };
};

let formats: Record<string, Format> | undefined;

/** Every ajv-formats format, each check linear in the length of what it checks; compiled on first use. */
export function formatsLinear(): Record<string, Format> {
  formats ??= formatsBuild();
  return formats;
}

function formatsBuild(): Record<string, Format> {
  // Loaded with the first schema compiled, as ajv is (schema-compiler.ts).
  const full = (createRequire(import.meta.url)('ajv-formats/dist/formats.js') as { fullFormats: Record<string, Format> }).fullFormats;
  const REWRITTEN = rewritten();
  return Object.fromEntries(Object.entries(full).map(([name, format]) => {
    const replaced = REWRITTEN[name];
    if (replaced) return [name, replaced];
    if (format instanceof RegExp) return [name, linear(format.source, format.flags)];
    if (typeof format === 'object' && format.validate instanceof RegExp) {
      return [name, { ...format, validate: linear(format.validate.source, format.validate.flags) }];
    }
    return [name, format];
  }));
}
