import { isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';

export type Path = readonly (string | number)[];

/** `tasks.build.depends_on[0]` */
export function pathFormat(path: Path): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/**
 * Line and column (1-based) of the field at `path`: the value for scalars, the
 * key for collections and for fields that do not exist (the nearest existing parent).
 */
export function positionOf(doc: Document, lc: LineCounter, path: Path, keyOfField = false): { line: number; col: number } {
  let node: unknown = doc.contents;
  let offset = (node as Node | null)?.range?.[0] ?? 0;
  // Where the current node's own key starts: a missing field is reported at its parent's key.
  let parentKey: number | undefined;
  for (let i = 0; i < path.length; i++) {
    const seg = path[i]!;
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && (isScalar(p.key) ? p.key.value : p.key) === seg);
      if (!pair) {
        offset = parentKey ?? offset;
        break;
      }
      const keyStart = (pair.key as Node | null)?.range?.[0];
      parentKey = keyStart;
      const last = i === path.length - 1;
      node = pair.value;
      const valueStart = (node as Node | null)?.range?.[0];
      if (last && (keyOfField || !isScalar(node)) && keyStart !== undefined) offset = keyStart;
      else offset = valueStart ?? keyStart ?? offset;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg] as Node | undefined;
      if (!item) break;
      node = item;
      offset = item.range?.[0] ?? offset;
      parentKey = offset;
    } else break;
  }
  const pos = lc.linePos(offset);
  return { line: pos.line, col: pos.col };
}
