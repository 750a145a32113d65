import { z } from 'zod';

/**
 * Counts as people write them for rate limits and token estimates (`500`, `300k`, `1.5m`). At the bottom of
 * the tree: the file format, the limits file and the CLI read them.
 */
export const COUNT_PATTERN = /^(\d+(?:\.\d+)?)([kKmM]?)$/;

/** The largest count stored (PostgreSQL integer). */
export const COUNT_MAX = 2_000_000_000;

/** A whole count: a number, or a string like 500, 300k, 1.5m. */
export function countValue(c: number | string): number {
  if (typeof c === 'number') return c;
  const m = COUNT_PATTERN.exec(c.trim());
  if (!m) throw new Error(`not a count: ${c}`);
  const unit = m[2]!.toLowerCase();
  return Math.round(Number(m[1]) * (unit === 'k' ? 1_000 : unit === 'm' ? 1_000_000 : 1));
}

const tooLarge = `must be at most ${COUNT_MAX.toLocaleString('en-US')}`;

export const countSchema = z.union([
  z.number().int().nonnegative().max(COUNT_MAX, { error: tooLarge }),
  z.string().regex(COUNT_PATTERN, { error: 'must be a whole number like 500, 300k or 1.5m' })
    .refine((c) => !COUNT_PATTERN.test(c) || countValue(c) <= COUNT_MAX, { error: tooLarge }),
]).describe('count: a whole number, or a string like 500, 300k, 1.5m');
