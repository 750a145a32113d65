import { LineCounter, visit, type Document } from 'yaml';
import { LIMITS, limitEnvName } from '../config/index.js';
import { DagValidationError, type SpecProblem } from '../errors.js';
import { jsonProblem, jsonSizeExceeds } from '../json-guard.js';
import { yamlDocumentParse } from '../yaml-document.js';
import { eventLoopTurn } from '../event-loop.js';
import { pathFormat, positionOf, type Path } from './locate.js';

/** Top-level fields with this prefix are ignored (x-common: &common …), in DAG files and templates alike. */
export const EXTENSION_PREFIX = 'x-';

/** Where a problem at a path of a file is: file:line:column and the field, as every DAG error names it. */
export type At = (p: Path, message: string, atKey?: boolean) => SpecProblem;

export interface YamlSource {
  /** The file's top-level mapping as plain data, aliases and merge keys applied, `x-` fields left out. */
  raw: Record<string, unknown>;
  at: At;
}

/**
 * Parse one YAML file that must hold one mapping (a DAG or a template). Throws DagValidationError for YAML
 * syntax, a duplicate key, an alias to nothing or one that expands too much, a NUL or a runaway nesting, each
 * located. `what` names the file's kind in the message for a file that is not a mapping. A large file is parsed
 * in slices that let the server answer other requests meanwhile (yaml-document.ts).
 */
export async function yamlSourceParse(source: string, file: string, what: string): Promise<YamlSource> {
  const lc = new LineCounter();
  // `<<` merge keys, as Docker Compose files use them (`b: { <<: *common, depends_on: [a] }`).
  const doc = await yamlDocumentParse(source, { lineCounter: lc, strict: true, merge: true });
  const at: At = (p, message, atKey = false) => {
    const pos = positionOf(doc, lc, p, atKey);
    return { file, line: pos.line, column: pos.col, path: pathFormat(p), message };
  };
  if (doc.errors.length) {
    // The parser's later errors mostly follow from its first (one unquoted `{` can make a hundred): say the first.
    const more = doc.errors.length - 1;
    throw new DagValidationError(doc.errors.slice(0, 1).map((e) => {
      // The parser notices an unclosed [ or { only at the next key; point at the bracket instead.
      const unclosed = /flow (sequence|mapping|collection)/i.test(e.message) ? unclosedBracketBefore(source, e.pos[0]) : undefined;
      const pos = lc.linePos(unclosed ?? e.pos[0]);
      const rest = source.slice(e.pos[0]);
      const after = more ? ` (${more} more YAML error${more > 1 ? 's' : ''} after it, which may follow from this one)` : '';
      return { file, line: pos.line, column: pos.col, path: '', message: yamlMessage(e.code, e.message, rest.slice(0, rest.search(/:|\n|$/))) + after };
    }));
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw new DagValidationError([aliasProblem(doc, lc, file, e as Error)]);
  }
  // Each of these passes is ~0.1 s on a 15,000-task DAG: the server answers between them.
  await eventLoopTurn();
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new DagValidationError([at([], `a ${what} file must be a YAML mapping with ${what === 'DAG' ? 'name and tasks' : 'tasks'}`)]);
  }
  // Top-level `x-…` fields are the file's own (a place to park anchors that tasks merge in, as in Docker Compose):
  // their aliases were expanded above; the fields themselves are not part of the DAG.
  for (const k of Object.keys(raw)) if (k.startsWith(EXTENSION_PREFIX)) delete (raw as Record<string, unknown>)[k];
  // A NUL ("\0"), an unpaired surrogate ("\ud800") or runaway nesting: located here, never a database error later.
  const hostile = jsonProblem(raw, LIMITS.jsonDepth);
  if (hostile) throw new DagValidationError([at(hostile.path, hostile.message)]);
  await eventLoopTurn();
  if (jsonSizeExceeds(raw, LIMITS.specChars)) {
    throw new DagValidationError([at([], `YAML aliases expand the ${what} to more than ${LIMITS.specChars} characters (${limitEnvName('specChars')})`)]);
  }
  return { raw: raw as Record<string, unknown>, at };
}

/** An alias that names no anchor, or expands too much: point at the first offending alias. */
function aliasProblem(doc: Document, lc: LineCounter, file: string, e: Error): SpecProblem {
  let offset = 0;
  let name = '';
  visit(doc, {
    Alias(_, node) {
      if (name) return visit.BREAK;
      if (!node.resolve(doc) || /alias count/i.test(e.message)) {
        name = node.source;
        offset = node.range?.[0] ?? 0;
        return visit.BREAK;
      }
      return undefined;
    },
  });
  const pos = lc.linePos(offset);
  const message = /alias count/i.test(e.message)
    ? 'YAML aliases expand too much (more than 100 expansions): write the values out'
    : `alias *${name} refers to no anchor &${name}`;
  return { file, line: pos.line, column: pos.col, path: '', message };
}

/** Offset of the last [ or { before `end` that is not closed, skipping quoted text and comments. */
function unclosedBracketBefore(source: string, end: number): number | undefined {
  const open: number[] = [];
  let quote: string | undefined;
  for (let i = 0; i < end; i++) {
    const c = source[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(source[i - 1]!))) i = source.indexOf('\n', i) < 0 ? end : source.indexOf('\n', i);
    else if (c === '[' || c === '{') open.push(i);
    else if (c === ']' || c === '}') open.pop();
  }
  return open.at(-1);
}

function yamlMessage(code: string, message: string, text: string): string {
  if (code === 'DUPLICATE_KEY') return `duplicate key "${text.trim()}"`;
  if (code === 'MULTIPLE_DOCS') {
    return 'a second YAML document starts here (---): a DAG file holds one DAG; put each in a file of its own (dagent submit a.yaml b.yaml creates them in one transaction)';
  }
  return `invalid YAML: ${message.split('\n')[0]}`;
}
