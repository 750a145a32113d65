/** The p-th percentile (nearest rank) of `xs`; NaN when empty. What the scenarios print their latencies with. */
export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}
