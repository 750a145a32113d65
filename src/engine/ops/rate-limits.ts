import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { DECLARED_RATE_LIMIT_DEFAULTS as D } from '../../config/index.js';
import { countSchema, countValue } from '../../counts.js';
import { pathFormat, positionOf } from '../../dag/locate.js';
import { didYouMean } from '../../dag/suggest.js';
import { withTx } from '../../db/tx.js';
import type { Db } from '../../db/handle.js';
import { rateLimitDelete, rateLimitKeys, rateLimitList, rateLimitUpsert, type RateLimitInput, type RateLimitRow } from '../../db/queries/rate-limits.js';
import { durationSchema, durationSeconds } from '../../durations.js';
import { DagValidationError, InvalidInputError, NotFoundError } from '../../errors.js';
import { MODEL_PATTERN } from '../../llm-models.js';

export type { RateLimitRow } from '../../db/queries/rate-limits.js';

/** A limit's key: a model (`openai/gpt-4o`) or a provider (`openai`: every `openai/…` model). */
export const rateLimitKeySchema = z.string().regex(MODEL_PATTERN, {
  error: 'must be a model like openai/gpt-4o or a provider like openai (letters, digits and . _ : / @ + -, at most 200)',
});

/** One limit as the limits file, the CLI and the HTTP API write it. */
export const rateLimitBodySchema = z.strictObject({
  requests: countSchema.optional().describe('attempts claimed on the model (or provider) per window'),
  tokens: countSchema.optional().describe('tokens reserved at claim (estimated_tokens), then used as reported, per window'),
  per: durationSchema.optional().describe(`the window, sliding (default ${D.windowSec}s; ${D.windowMinSec}s to ${D.windowMaxSec / 60}m)`),
  default_tokens: countSchema.optional().describe(`what a task without estimated_tokens reserves (default ${D.defaultTokens})`),
}).superRefine((l, ctx) => {
  if (l.requests === undefined && l.tokens === undefined) ctx.addIssue({ code: 'custom', path: [], message: 'set requests, tokens or both' });
  // A limit of 0 would stop the model (or the whole provider) for good: that is not a rate.
  for (const field of ['requests', 'tokens'] as const) {
    const v = l[field];
    if (v !== undefined && countSchema.safeParse(v).success && countValue(v) < 1) ctx.addIssue({ code: 'custom', path: [field], message: 'must be at least 1' });
  }
  if (l.per !== undefined && durationSchema.safeParse(l.per).success) {
    const sec = durationSeconds(l.per);
    if (sec < D.windowMinSec || sec > D.windowMaxSec || !Number.isInteger(sec)) {
      ctx.addIssue({ code: 'custom', path: ['per'], message: `must be whole seconds from ${D.windowMinSec}s to ${D.windowMaxSec / 60}m` });
    }
  }
});
export type RateLimitBody = z.input<typeof rateLimitBodySchema>;

/** The limits file: `rate_limits: { KEY: { requests, tokens, per, default_tokens } }`. */
export const rateLimitsFileSchema = z.strictObject({
  rate_limits: z.record(rateLimitKeySchema, rateLimitBodySchema),
});

function inputOf(key: string, b: z.output<typeof rateLimitBodySchema>): RateLimitInput {
  return {
    key,
    requests: b.requests === undefined ? null : countValue(b.requests),
    tokens: b.tokens === undefined ? null : countValue(b.tokens),
    windowSec: b.per === undefined ? D.windowSec : durationSeconds(b.per),
    defaultTokens: b.default_tokens === undefined ? D.defaultTokens : countValue(b.default_tokens),
  };
}

function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const i = r.error.issues[0]!;
  const field = [where, ...i.path.map(String)].filter(Boolean).join('.');
  throw new InvalidInputError(field ? `${field}: ${i.message}` : i.message, { field });
}

/** Declare or change one limit (admin). Applies to the next claim, fleet-wide. */
export async function rateLimitSet(db: Db, key: string, body: unknown, opts: { log?: Logger } = {}): Promise<RateLimitRow> {
  parseOrThrow(rateLimitKeySchema, key, 'key');
  const limit = inputOf(key, parseOrThrow(rateLimitBodySchema, body, ''));
  await withTx(db, async (tx) => {
    const existing = await rateLimitKeys(tx);
    if (!existing.includes(key) && existing.length >= D.maxLimits) {
      throw new InvalidInputError(`at most ${D.maxLimits} rate limits may be declared (the claim reads them all); remove one first`);
    }
    await rateLimitUpsert(tx, limit);
  });
  opts.log?.info({ rateLimit: limit }, 'rate limit declared');
  return (await rateLimitList(db)).find((l) => l.key === key)!;
}

/** Remove a declared limit; NotFoundError when there is none. */
export async function rateLimitRemove(db: Db, key: string, opts: { log?: Logger } = {}): Promise<void> {
  if (!(await rateLimitDelete(db, key))) throw new NotFoundError('rate limit', key);
  opts.log?.info({ key }, 'rate limit removed');
}

export { rateLimitList };

/**
 * Read a limits file, every problem named with file:line:column, before anything is written. Throws
 * DagValidationError (bad input: exit 2) listing them.
 */
export function rateLimitsFileRead(file: string): RateLimitInput[] {
  const display = path.relative(process.cwd(), file) || file;
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch (e) {
    throw new DagValidationError([{ file: display, line: 0, column: 0, path: '', message: `cannot read: ${(e as Error).message}` }]);
  }
  const lc = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lc, uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length) {
    throw new DagValidationError(doc.errors.map((e) => {
      const pos = lc.linePos(e.pos[0]);
      return { file: display, line: pos.line, column: pos.col, path: '', message: e.message.split('\n')[0]! };
    }));
  }
  const r = rateLimitsFileSchema.safeParse(doc.toJS({ maxAliasCount: 100 }));
  if (!r.success) {
    throw new DagValidationError(r.error.issues.flatMap((i) => {
      const p = i.path.map((s) => (typeof s === 'number' ? s : String(s)));
      const problem = (at: Array<string | number>, message: string, atKey: boolean) => {
        const pos = positionOf(doc, lc, at, atKey);
        return { file: display, line: pos.line, column: pos.col, path: pathFormat(at), message };
      };
      if (i.code === 'unrecognized_keys') {
        const known = p.length === 0 ? ['rate_limits'] : ['requests', 'tokens', 'per', 'default_tokens'];
        return i.keys.map((k) => problem([...p, k], `unknown field "${k}"${didYouMean(k, known)}; one of ${known.join(', ')}`, true));
      }
      // A bad key of the record: its own message (what a key must look like), at the key.
      const message = i.code === 'invalid_key' ? i.issues[0]?.message ?? i.message : i.message;
      return [problem(p, message, i.code === 'invalid_key')];
    }));
  }
  return Object.entries(r.data.rate_limits).map(([key, b]) => inputOf(key, b));
}

/**
 * Declare every limit of a file in one transaction; with `prune`, remove the limits the file does not name
 * (the file is then the whole configuration). Returns what changed.
 */
export async function rateLimitsApply(db: Db, limits: RateLimitInput[], opts: { prune?: boolean; log?: Logger } = {}): Promise<{ set: string[]; removed: string[] }> {
  if (limits.length > D.maxLimits) throw new InvalidInputError(`at most ${D.maxLimits} rate limits may be declared; the file has ${limits.length}`);
  const removed: string[] = [];
  await withTx(db, async (tx) => {
    for (const l of limits) await rateLimitUpsert(tx, l);
    if (opts.prune) {
      const named = new Set(limits.map((l) => l.key));
      for (const key of await rateLimitKeys(tx)) if (!named.has(key) && await rateLimitDelete(tx, key)) removed.push(key);
    }
    if ((await rateLimitKeys(tx)).length > D.maxLimits) throw new InvalidInputError(`at most ${D.maxLimits} rate limits may be declared; use --prune to replace them`);
  });
  opts.log?.info({ set: limits.map((l) => l.key), removed }, 'rate limits applied');
  return { set: limits.map((l) => l.key), removed };
}
