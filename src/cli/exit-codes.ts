import { CommanderError } from 'commander';
import { DagentError, ERROR_CODES, EXIT } from '../errors.js';

/** The exit code for what a command threw: its code's entry in ERROR_CODES; usage errors are invalid input. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.invalidInput;
  if (err instanceof DagentError) return ERROR_CODES[err.code].exit ?? EXIT.error;
  return EXIT.error;
}
