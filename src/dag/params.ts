import type { Path } from './locate.js';
import { LIMITS, limitEnvName } from '../config/index.js';
import { RESERVED_NAMES } from '../json-guard.js';
import { didYouMean } from './suggest.js';

export type ParamValue = string | number | boolean;
export interface ParamProblem { path: Path; message: string }

type Declared = Record<string, unknown>;

/** Values of every declared param: `given` (from --param, strings) coerced to the default's type, else the default. */
export function paramsResolve(
  declared: Declared, given: Record<string, string>, opts: { ignoreUndeclared?: boolean } = {},
): { values: Record<string, ParamValue>; missing: Set<string>; problems: ParamProblem[] } {
  const values: Record<string, ParamValue> = {};
  const missing = new Set<string>();
  const problems: ParamProblem[] = [];
  for (const [name, decl] of Object.entries(declared)) {
    const d = typeof decl === 'object' && decl !== null ? (decl as { default?: ParamValue; required?: boolean }) : { default: decl as ParamValue };
    if (Object.hasOwn(given, name)) {
      const coerced = coerce(given[name]!, d.default);
      if (coerced !== undefined) values[name] = coerced;
      else {
        missing.add(name);
        problems.push({ path: ['params', name], message: `--param ${name}=${given[name]}: expected a ${typeof d.default}` });
      }
    } else if (d.default !== undefined) values[name] = d.default;
    else if (d.required === false) values[name] = '';
    else {
      missing.add(name);
      problems.push({ path: ['params', name], message: `param "${name}" has no default and was not given (pass --param ${name}=VALUE)` });
    }
  }
  for (const name of Object.keys(given)) {
    if (RESERVED_NAMES.has(name)) problems.push({ path: ['params'], message: `--param ${name}: "${name}" is a reserved name, never a param` });
    else if (!Object.hasOwn(declared, name) && !opts.ignoreUndeclared) {
      problems.push({ path: ['params'], message: `--param ${name}: the DAG declares no such param${didYouMean(name, Object.keys(declared))}` });
    }
  }
  return { values, missing, problems };
}

function coerce(raw: string, like: ParamValue | undefined): ParamValue | undefined {
  if (typeof like === 'number') {
    const n = Number(raw);
    return raw.trim() !== '' && Number.isFinite(n) ? n : undefined;
  }
  if (typeof like === 'boolean') return raw === 'true' ? true : raw === 'false' ? false : undefined;
  return raw;
}

const PLACEHOLDER = /\$\{params\.([A-Za-z_][A-Za-z0-9_]*)\}/g;
const WHOLE_PLACEHOLDER = /^\$\{params\.([A-Za-z_][A-Za-z0-9_]*)\}$/;

/**
 * Replace `${params.x}` in every string of `value` (structure unchanged, so error
 * paths still point into the file). A string that is only a placeholder takes the
 * param's type, so `priority: ${params.prio}` yields a number.
 */
export function paramsSubstitute(
  value: unknown, params: Record<string, ParamValue>, path: Path, problems: ParamProblem[], missing: ReadonlySet<string> = new Set(),
  budget: { left: number } = { left: Infinity },
): unknown {
  if (budget.left < 0) return value;
  if (typeof value === 'string') {
    const whole = WHOLE_PLACEHOLDER.exec(value);
    if (whole) {
      if (Object.hasOwn(params, whole[1]!)) return spend(params[whole[1]!]!, path, problems, budget);
    }
    for (const bad of value.match(/\$\{params?\.[^}]*\}/g) ?? []) {
      if (!WHOLE_PLACEHOLDER.test(bad)) problems.push({ path, message: `malformed placeholder ${bad}: write \${params.NAME} with NAME of letters, digits and _` });
    }
    // Inserted text is charged as it is made, so a runaway expansion stops at the limit instead of being built.
    let room = budget.left - value.length;
    const out = value.replace(PLACEHOLDER, (m, name: string) => {
      if (Object.hasOwn(params, name)) {
        const text = String(params[name]);
        room -= text.length;
        return room < 0 ? '' : text;
      }
      if (missing.has(name)) return m; // already reported as a missing param
      problems.push({ path, message: `unknown param "${name}" in ${m}${didYouMean(name, Object.keys(params))}` });
      return m;
    });
    if (room < 0) {
      overBudget(path, problems, budget);
      return value;
    }
    budget.left = room;
    return out;
  }
  if (Array.isArray(value)) return value.map((v, i) => paramsSubstitute(v, params, [...path, i], problems, missing, budget));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, paramsSubstitute(v, params, [...path, k], problems, missing, budget)]));
  }
  return value;
}

/** Charge a whole-placeholder value to the expansion budget. */
function spend<T extends ParamValue>(v: T, path: Path, problems: ParamProblem[], budget: { left: number }): T {
  budget.left -= typeof v === 'string' ? v.length : 8;
  if (budget.left < 0) overBudget(path, problems, budget);
  return v;
}

/** The first value past the expansion budget is reported, once; expansion stops there. */
function overBudget(path: Path, problems: ParamProblem[], budget: { left: number }): void {
  budget.left = -1;
  problems.push({ path, message: `params expand the DAG to more than ${LIMITS.specChars} characters (${limitEnvName('specChars')})` });
}
