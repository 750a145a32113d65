import { CommanderError } from 'commander';
import { DagentError } from '../errors.js';

/** 0 success, 2 invalid input (nothing was written), 3 backpressure (queue full, nothing was written), 1 anything else. */
export const EXIT = { ok: 0, error: 1, invalidInput: 2, backpressure: 3 } as const;

const INVALID_INPUT_CODES = new Set(['DAG_INVALID', 'CYCLE', 'INVALID_INPUT', 'NOT_FOUND']);

export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.invalidInput;
  if (err instanceof DagentError && INVALID_INPUT_CODES.has(err.code)) return EXIT.invalidInput;
  if (err instanceof DagentError && err.code === 'BACKPRESSURE') return EXIT.backpressure;
  return EXIT.error;
}
