import { readFileSync } from 'node:fs';
import { InvalidInputError } from '../errors.js';

/**
 * A JSON value given on the command line as `--NAME <json>` or `--NAME-file <file>` (- for standard input):
 * `given` false when neither was. A value that is not JSON, or a file that cannot be read, is exit 2 naming the option.
 */
export function jsonOptionRead(name: string, inline: string | undefined, file: string | undefined): { given: boolean; value?: unknown } {
  if (inline !== undefined && file !== undefined) throw new InvalidInputError(`give --${name} or --${name}-file, not both`);
  if (inline === undefined && file === undefined) return { given: false };
  const source = file !== undefined ? `--${name}-file ${file}` : `--${name}`;
  let text: string;
  try {
    text = file !== undefined ? readFileSync(file === '-' ? 0 : file, 'utf8') : inline!;
  } catch (e) {
    throw new InvalidInputError(`${source}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return { given: true, value: JSON.parse(text) };
  } catch (e) {
    throw new InvalidInputError(`${source}: not JSON (${(e as Error).message}); quote a string as '"text"'`);
  }
}
