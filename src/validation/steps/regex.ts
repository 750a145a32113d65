import { z } from 'zod';
import { LIMITS } from '../../config/index.js';
import { regexCompile } from '../regex-engine.js';
import type { InlineStepKind } from './kind.js';

/** Most characters of a non-matching text quoted in the verdict. */
const QUOTED_CHARS = 200;

const fileSchema = z.strictObject({
  kind: z.literal('regex'),
  pattern: z.string().max(2000).describe('regular expression the text must match somewhere (anchor it with ^…$ for a whole match); RE2 syntax, which runs in linear time: no lookaround, no backreferences'),
  flags: z.string().regex(/^[imsu]{0,4}$/, { error: 'flags may use i, m, s and u' }).optional(),
  field: z.string().max(200).optional().describe('dot path to a field of a JSON output (summary, items.0.title); default the whole output, which must then be text'),
}).describe('check text, or one field of a JSON output, against a regular expression');

export interface RegexStep { kind: 'regex'; pattern: string; flags?: string; field?: string }

/** Text, or one field of a JSON output, must match a regular expression. */
export const regexStep: InlineStepKind<'regex', typeof fileSchema, RegexStep> = {
  kind: 'regex',
  mode: 'inline',
  fileSchema,
  resolve(s) {
    const compiled = regexCompile(s.pattern, s.flags);
    if ('error' in compiled) return [{ path: ['pattern'], message: `not a regular expression dagent can run: ${compiled.error}` }];
    return { kind: 'regex', pattern: s.pattern, ...(s.flags ? { flags: s.flags } : {}), ...(s.field !== undefined ? { field: s.field } : {}) };
  },
  check(step, output) {
    const target = step.field === undefined ? output : fieldAt(output, step.field);
    const where = step.field === undefined ? 'the output' : `field ${step.field}`;
    if (target === undefined || target === null) return { pass: false, reasons: [`${where} is missing`] };
    if (typeof target === 'object') return { pass: false, reasons: [`${where} is ${Array.isArray(target) ? 'an array' : 'an object'}, not text${step.field === undefined ? ' (name a field)' : ''}`] };
    const text = String(target);
    if (text.length > LIMITS.regexInputChars) {
      return { pass: false, reasons: [`${where} is ${text.length} characters; a regex step checks at most ${LIMITS.regexInputChars} (use a test step for long outputs)`] };
    }
    const compiled = regexCompile(step.pattern, step.flags);
    // Refused at submission; reaching here means the stored spec was edited by hand.
    if ('error' in compiled) return { pass: false, reasons: [`the pattern itself is invalid: ${compiled.error}`] };
    const pass = compiled.test(text);
    const quoted = `${JSON.stringify(text.slice(0, QUOTED_CHARS))}${text.length > QUOTED_CHARS ? '…' : ''}`;
    return { pass, reasons: pass ? [] : [`${where} does not match /${step.pattern}/${step.flags ?? ''}: ${quoted}`] };
  },
};

/** `a.b.0.c` into an output (array indices allowed). */
export function fieldAt(value: unknown, field: string): unknown {
  let v = value;
  for (const seg of field.split('.')) v = v !== null && typeof v === 'object' && Object.hasOwn(v, seg) ? (v as Record<string, unknown>)[seg] : undefined;
  return v;
}
