import { schemaCompile } from './json-schema.js';
import type { InlineStep } from './steps.js';
import type { Verdict } from './verdict.js';

const MAX_REASONS = 50;

/** Check an output against a json-schema or regex step, in the submitting process. */
export function inlineStepRun(step: InlineStep, output: unknown): Verdict {
  return step.kind === 'json-schema' ? schemaStepRun(step, output) : regexStepRun(step, output);
}

function schemaStepRun(step: Extract<InlineStep, { kind: 'json-schema' }>, output: unknown): Verdict {
  const compiled = schemaCompile(step.schema);
  // Refused at submission; reaching here means the stored spec was edited by hand.
  if ('error' in compiled) return { pass: false, reasons: [`the schema itself is invalid: ${compiled.error}`] };
  const violations = compiled.validate(output);
  const reasons = violations.slice(0, MAX_REASONS).map((v) => `${v.pointer} ${v.message}`);
  if (violations.length > MAX_REASONS) reasons.push(`… and ${violations.length - MAX_REASONS} more`);
  return { pass: violations.length === 0, reasons };
}

function regexStepRun(step: Extract<InlineStep, { kind: 'regex' }>, output: unknown): Verdict {
  const target = step.field === undefined ? output : fieldAt(output, step.field);
  const where = step.field === undefined ? 'the output' : `field ${step.field}`;
  if (target === undefined || target === null) return { pass: false, reasons: [`${where} is missing`] };
  if (typeof target === 'object') return { pass: false, reasons: [`${where} is ${Array.isArray(target) ? 'an array' : 'an object'}, not text${step.field === undefined ? ' (name a field)' : ''}`] };
  const text = String(target);
  const pass = new RegExp(step.pattern, step.flags).test(text);
  return { pass, reasons: pass ? [] : [`${where} does not match /${step.pattern}/${step.flags ?? ''}: ${JSON.stringify(text.slice(0, 200))}${text.length > 200 ? '…' : ''}`] };
}

/** `a.b.0.c` into an output (array indices allowed). */
export function fieldAt(value: unknown, field: string): unknown {
  let v = value;
  for (const seg of field.split('.')) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[seg] : undefined;
  return v;
}
