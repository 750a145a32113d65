import type { Path } from './locate.js';
import { LIMITS, limitEnvName } from '../config/index.js';
import { RESERVED_NAMES } from '../json-guard.js';
import { didYouMean } from './suggest.js';

export type ParamScalar = string | number | boolean;
/** A list param's value is a list of scalars (a for_each maps over it). */
export type ParamValue = ParamScalar | ParamScalar[];
export interface ParamProblem { path: Path; message: string }

type Declared = Record<string, unknown>;

/**
 * How the values were given: `--param` (text from the command line, coerced to the default's type; problems at the
 * declaration) or a group's `with:` in a DAG (typed YAML values; problems at `with` in the DAG, `withAt`).
 */
export type ParamsGiven =
  | { as: 'param'; values: Record<string, string> }
  | { as: 'with'; values: Record<string, ParamValue>; withAt: Path };

/** Values of every declared param: the given ones (coerced to the default's type), else the default. */
export function paramsResolve(
  declared: Declared, g: ParamsGiven, opts: { ignoreUndeclared?: boolean } = {},
): { values: Record<string, ParamValue>; missing: Set<string>; problems: ParamProblem[] } {
  const values: Record<string, ParamValue> = {};
  const missing = new Set<string>();
  const problems: ParamProblem[] = [];
  const byWith = g.as === 'with';
  for (const [name, decl] of Object.entries(declared)) {
    const d = typeof decl === 'object' && decl !== null && !Array.isArray(decl) ? (decl as { default?: ParamValue; required?: boolean }) : { default: decl as ParamValue };
    if (Object.hasOwn(g.values, name)) {
      const raw = g.values[name]!;
      const coerced = typeof raw === 'string' && !byWith ? coerce(raw, d.default) : sameKind(raw, d.default);
      if (coerced !== undefined) values[name] = coerced;
      else {
        missing.add(name);
        problems.push(byWith
          ? { path: [...g.withAt, name], message: `expected ${kindOf(d.default)} (the template's default for ${name} is one)` }
          : { path: ['params', name], message: `--param ${name}=${String(raw)}: expected ${kindOf(d.default)}` });
      }
    } else if (d.default !== undefined) values[name] = d.default;
    else if (d.required === false) values[name] = '';
    else {
      missing.add(name);
      problems.push(byWith
        ? { path: g.withAt, message: `the template's param "${name}" has no default and was not given (add ${name}: VALUE under with)` }
        : { path: ['params', name], message: `param "${name}" has no default and was not given (pass --param ${name}=VALUE)` });
    }
  }
  for (const name of Object.keys(g.values)) {
    if (byWith) {
      if (!Object.hasOwn(declared, name)) problems.push({ path: [...g.withAt, name], message: `the template declares no param "${name}"${didYouMean(name, Object.keys(declared))}` });
    } else if (RESERVED_NAMES.has(name)) problems.push({ path: ['params'], message: `--param ${name}: "${name}" is a reserved name, never a param` });
    else if (!Object.hasOwn(declared, name) && !opts.ignoreUndeclared) {
      problems.push({ path: ['params'], message: `--param ${name}: the DAG declares no such param${didYouMean(name, Object.keys(declared))}` });
    }
  }
  return { values, missing, problems };
}

function kindOf(v: ParamValue | undefined): string {
  return Array.isArray(v) ? 'a list' : v === undefined ? 'a value' : `a ${typeof v}`;
}

/** A typed value is taken as it is when its kind (list, number, boolean, string) is the default's. */
function sameKind(v: ParamValue, like: ParamValue | undefined): ParamValue | undefined {
  if (like === undefined) return v;
  if (Array.isArray(like) !== Array.isArray(v)) return undefined;
  return Array.isArray(v) || typeof v === typeof like ? v : undefined;
}

/** A list param from the command line: a JSON list (`["a b", "c"]`), or items separated by commas (`api,web`). */
function listParse(raw: string): ParamScalar[] | undefined {
  if (raw.trimStart().startsWith('[')) {
    try {
      const v: unknown = JSON.parse(raw);
      return Array.isArray(v) && v.every((x) => ['string', 'number', 'boolean'].includes(typeof x)) ? v as ParamScalar[] : undefined;
    } catch {
      return undefined;
    }
  }
  return raw.trim() === '' ? [] : raw.split(',').map((x) => x.trim());
}

function coerce(raw: string, like: ParamValue | undefined): ParamValue | undefined {
  if (Array.isArray(like)) return listParse(raw);
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
        const v = params[name]!;
        // A list param inside text reads as its items: "repos: ${params.repos}" → "repos: api, web".
        const text = Array.isArray(v) ? v.join(', ') : String(v);
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
  budget.left -= typeof v === 'string' ? v.length : Array.isArray(v) ? JSON.stringify(v).length : 8;
  if (budget.left < 0) overBudget(path, problems, budget);
  return v;
}

/** The first value past the expansion budget is reported, once; expansion stops there. */
function overBudget(path: Path, problems: ParamProblem[], budget: { left: number }): void {
  budget.left = -1;
  problems.push({ path, message: `params expand the DAG to more than ${LIMITS.specChars} characters (${limitEnvName('specChars')})` });
}
