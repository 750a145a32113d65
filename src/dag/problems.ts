import type { z } from 'zod';
import type { SpecProblem } from '../errors.js';
import { objectKeysAt } from './file-schema.js';
import type { Path } from './locate.js';
import { closestMatch, didYouMean } from './suggest.js';
import type { At } from './yaml-source.js';

/** A zod error as located problems, one per mistake, in the user's words. */
export function zodProblems(error: z.ZodError, prefix: Path, root: unknown, at: At, keysAt: (p: Path) => string[] | undefined = objectKeysAt): SpecProblem[] {
  return misspeltExplained(error.issues as z.core.$ZodIssue[], root, prefix)
    .flatMap((issue) => issueProblems(issue, [...prefix, ...(issue.path as (string | number)[])], root, at, keysAt));
}

/**
 * A required field that is missing because it was misspelt (`taks:` for `tasks:`) is one mistake: the unknown
 * field, at its line, says it (did you mean "tasks"?). The "missing" issue it explains is dropped.
 */
function misspeltExplained(issues: z.core.$ZodIssue[], root: unknown, prefix: Path): z.core.$ZodIssue[] {
  const unknownAt = new Map<string, string[]>();
  for (const i of issues) if (i.code === 'unrecognized_keys') unknownAt.set(JSON.stringify(i.path), i.keys);
  if (unknownAt.size === 0) return issues;
  return issues.filter((i) => {
    if (i.code !== 'invalid_type' || i.path.length === 0 || valueAt(root, [...prefix, ...(i.path as Path)]) !== undefined) return true;
    const field = String(i.path[i.path.length - 1]);
    const siblings = unknownAt.get(JSON.stringify(i.path.slice(0, -1))) ?? [];
    return !siblings.some((k) => closestMatch(k, [field]) === field);
  });
}

/** One zod issue as located problems; unions are unfolded into the branch whose type matched. */
function issueProblems(issue: z.core.$ZodIssue, p: Path, root: unknown, at: At, keysAt: (p: Path) => string[] | undefined): SpecProblem[] {
  const clean = (m: string) => m.replace(/^Invalid (input|string): /, '');
  switch (issue.code) {
    case 'unrecognized_keys': {
      const allowed = keysAt(p) ?? [];
      return issue.keys.map((k) => at([...p, k], `unknown field "${k}"${unknownFieldHint(k, p, allowed)}`, true));
    }
    case 'invalid_key':
      return [at(p, issue.issues.map((i) => clean(i.message)).join('; '), true)];
    case 'invalid_type':
      if (valueAt(root, p) === undefined) return [at(p, 'required field is missing')];
      if (issue.expected === 'int') return [at(p, 'must be a whole number')];
      return [at(p, clean(issue.message))];
    case 'invalid_value': {
      const got = valueAt(root, p);
      const options = issue.values.map(String);
      return [at(p, `must be one of ${options.join(', ')}${typeof got === 'string' ? didYouMean(got, options) : ''}`)];
    }
    case 'invalid_union': {
      if (issue.errors.length === 0 && 'discriminator' in issue && issue.discriminator) {
        const got = valueAt(root, p);
        const options = ('options' in issue ? issue.options ?? [] : []).map(String);
        return [at(p, `${issue.discriminator} must be one of ${options.join(', ')}${typeof got === 'string' ? didYouMean(got, options) : ''}`)];
      }
      // A branch whose complaints are all below its root matched the value's type: its complaints are the specific ones.
      const matched = issue.errors.find((branch) => branch.length > 0 && branch.every((i) => i.path.length > 0 || i.code !== 'invalid_type'));
      if (matched) return matched.flatMap((i) => issueProblems(i, [...p, ...(i.path as (string | number)[])], root, at, keysAt));
      const expected = [...new Set(issue.errors.flatMap((b) => b.filter((i) => i.code === 'invalid_type').map((i) => (i as { expected: string }).expected)))];
      return [at(p, `expected ${expected.join(' or ') || 'a different value'}`)];
    }
    default:
      return [at(p, clean(issue.message))];
  }
}

/** A field written one level too high (a spec field on the task) is a common slip: say where it belongs. */
function unknownFieldHint(key: string, p: Path, allowed: string[]): string {
  const isTaskLevel = p.length === 2 && p[0] === 'tasks';
  const here = closestMatch(key, allowed);
  if (here || !isTaskLevel) return didYouMean(key, allowed);
  const inSpec = closestMatch(key, objectKeysAt(['spec']) ?? []);
  if (inSpec) return ` (did you mean spec.${inSpec}?)`;
  const inConstraints = closestMatch(key, objectKeysAt(['constraints']) ?? []);
  return inConstraints ? ` (did you mean spec.constraints.${inConstraints}?)` : '';
}

export function valueAt(root: unknown, p: Path): unknown {
  let v = root;
  for (const seg of p) v = v && typeof v === 'object' ? (v as Record<string | number, unknown>)[seg] : undefined;
  return v;
}
