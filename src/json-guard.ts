/**
 * Checks for values that come from outside (request bodies, DAG files, agents'
 * outputs) before anything stores or walks them: PostgreSQL cannot store a NUL
 * character or an unpaired UTF-16 surrogate, deep nesting exhausts the stack of
 * every recursive walk, and names that Object.prototype already has turn lookups
 * in plain objects into lookups of functions. Each check names where the problem is.
 */

/** Names every plain object already answers to (`constructor`, `toString`, `__proto__`, …): never a name dagent looks up. */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

export type JsonPath = (string | number)[];
export interface JsonProblem { path: JsonPath; message: string }

/** Why a string cannot be stored as PostgreSQL text or jsonb, or null. */
export function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'contains a NUL character (\\u0000), which cannot be stored';
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed()) return 'contains an unpaired UTF-16 surrogate (not valid Unicode)';
  return null;
}

/**
 * The first problem in a parsed JSON (or YAML) value: a string or key that cannot
 * be stored, a `__proto__` key, or nesting deeper than `maxDepth`. Walks iteratively,
 * so a value nested far deeper than the limit is refused, not a stack overflow.
 */
export function jsonProblem(value: unknown, maxDepth: number): JsonProblem | null {
  const stack: Array<{ v: unknown; path: JsonPath }> = [{ v: value, path: [] }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      const bad = stringProblem(v);
      if (bad) return { path, message: bad };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (path.length >= maxDepth) return { path, message: `nested deeper than ${maxDepth} levels` };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: [...path, i] });
      continue;
    }
    for (const key of Object.keys(v)) {
      if (key === '__proto__') return { path: [...path, key], message: '"__proto__" is not allowed as a key' };
      const bad = stringProblem(key);
      if (bad) return { path, message: `a key ${bad}` };
      stack.push({ v: (v as Record<string, unknown>)[key], path: [...path, key] });
    }
  }
  return null;
}

/**
 * Whether a value would take more than `maxChars` characters as JSON (roughly: strings,
 * keys and a few characters per item), found without building the text, and stopping
 * as soon as it is known: a YAML alias repeated a hundred times is a hundred copies here.
 */
export function jsonSizeExceeds(value: unknown, maxChars: number): boolean {
  let size = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (v === null || typeof v !== 'object') size += 5;
    else if (Array.isArray(v)) {
      size += 2 + v.length;
      for (const item of v) stack.push(item);
    } else {
      for (const [k, item] of Object.entries(v)) {
        size += k.length + 4;
        stack.push(item);
      }
    }
    if (size > maxChars) return true;
  }
  return false;
}

/**
 * Whether JSON text opens more than `maxDepth` nested arrays or objects: checked
 * on the raw text, before JSON.parse, whose own recursion a deep enough body overflows.
 */
export function jsonTextTooDeep(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as UTF-8 text, or the offset of the first byte that is not valid UTF-8. */
export function utf8Decode(bytes: Uint8Array): { text: string } | { invalidAt: number } {
  try {
    return { text: strictUtf8.decode(bytes) };
  } catch {
    // Rare path: the first bad byte is where a prefix stops decoding (a streamed prefix
    // may end mid-character; only a byte that can never be valid throws).
    let lo = 0;
    let hi = bytes.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, mid + 1), { stream: true });
        lo = mid + 1;
      } catch {
        hi = mid;
      }
    }
    // A sequence cut short is seen at the byte after its lead: report where the sequence starts.
    let start = lo;
    while (start > 0 && lo - start < 3 && !decodesWhole(bytes.subarray(0, start))) start--;
    return { invalidAt: start };
  }
}

function decodesWhole(bytes: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** `a.b[0].c` */
export function jsonPathFormat(root: string, path: JsonPath): string {
  let out = root;
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/** The first `n` UTF-16 units of `s`, one fewer when the cut would split a surrogate pair (storable JSON text). */
export function textHead(s: string, n: number): string {
  const head = s.slice(0, n);
  return head.length < s.length && /[\uD800-\uDBFF]$/.test(head) ? head.slice(0, -1) : head;
}

/** The last `n` UTF-16 units of `s`, one fewer when the cut would split a surrogate pair. */
export function textTail(s: string, n: number): string {
  const tail = s.length > n ? s.slice(-n) : s;
  return tail.length < s.length && /^[\uDC00-\uDFFF]/.test(tail) ? tail.slice(1) : tail;
}
