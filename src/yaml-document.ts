import {
  Composer, Lexer, Parser, YAMLParseError, isScalar, visit,
  type CST, type Document, type DocumentOptions, type LineCounter, type ParseOptions, type SchemaOptions,
} from 'yaml';
import { eventLoopTurn, forEachSliced } from './event-loop.js';

export type YamlDocumentOptions = Omit<ParseOptions & DocumentOptions & SchemaOptions, 'uniqueKeys' | 'prettyErrors' | 'lineCounter'> & { lineCounter: LineCounter };

/**
 * The yaml package's `parseDocument(source, { ...options, uniqueKeys: true, prettyErrors: false })`, with the same
 * document and the same errors, but made for a server:
 *  - the duplicate-key check is linear: the parser's compares each key with every key before it in its mapping
 *    (a 15,000-task DAG held the event loop 7-9 s; 40,000 keys in one mapping, 709 KB, 32 s); here each mapping's
 *    keys go in a Set once;
 *  - lexing and parsing give the event loop a turn every few milliseconds (event-loop.ts), the ~0.5 s they take
 *    for a 700 KB file. Composing the document from the parsed tokens stays one piece (0.2-0.4 s for a
 *    15,000-task DAG), with a turn before and after it.
 */
export async function yamlDocumentParse(source: string, options: YamlDocumentOptions): Promise<Document.Parsed> {
  const lineCounter = options.lineCounter;
  const parser = new Parser(lineCounter.addNewLine);
  // What Parser.parse does first, for the line starting at offset 0.
  lineCounter.addNewLine(0);
  const tokens: CST.Token[] = [];
  await forEachSliced(new Lexer().lex(source), (lexeme) => {
    for (const token of parser.next(lexeme)) tokens.push(token);
  });
  for (const token of parser.end()) tokens.push(token);
  await eventLoopTurn();

  // As parseDocument: the first document, and an error at the second if there is one.
  const composer = new Composer({ ...options, uniqueKeys: false, prettyErrors: false });
  let doc: Document.Parsed | undefined;
  for (const next of composer.compose(tokens, true, source.length)) {
    if (!doc) doc = next;
    else if (doc.options.logLevel !== 'silent') {
      doc.errors.push(new YAMLParseError([next.range[0], next.range[1]], 'MULTIPLE_DOCS', 'Source contains multiple documents; please use YAML.parseAllDocuments()'));
      break;
    }
  }
  await eventLoopTurn();
  // compose(…, forceDoc = true) yields a document even for an empty source.
  doc!.errors = inPositionOrder(doc!.errors, duplicateKeyErrors(doc!));
  return doc!;
}

/**
 * A DUPLICATE_KEY error at every key its mapping already holds, as the parser reports them (at the key, for the
 * second and each later one). Keys are equal as the parser compares them: scalars by value (`===`), anything else
 * never (an alias, a mapping as a key; each `<<` merge key is a value of its own).
 */
function duplicateKeyErrors(doc: Document.Parsed): YAMLParseError[] {
  const errors: YAMLParseError[] = [];
  visit(doc, {
    Map(_, map) {
      const seen = new Set<unknown>();
      for (const { key } of map.items) {
        if (!isScalar(key) || Number.isNaN(key.value)) continue;
        if (!seen.has(key.value)) seen.add(key.value);
        else errors.push(new YAMLParseError([key.range![0], key.range![0] + 1], 'DUPLICATE_KEY', 'Map keys must be unique'));
      }
    },
  });
  return errors;
}

/** The parser's errors with `added` among them by position, as the parser would have reported them while composing. */
function inPositionOrder(errors: YAMLParseError[], added: YAMLParseError[]): YAMLParseError[] {
  if (added.length === 0) return errors;
  added.sort((a, b) => a.pos[0] - b.pos[0]);
  const out: YAMLParseError[] = [];
  let j = 0;
  for (const e of errors) {
    while (j < added.length && added[j]!.pos[0] < e.pos[0]) out.push(added[j++]!);
    out.push(e);
  }
  return out.concat(added.slice(j));
}
