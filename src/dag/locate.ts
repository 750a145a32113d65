import { isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node, type Pair, type YAMLMap } from 'yaml';

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
      const pair = pairOf(node, seg);
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

/**
 * Each mapping's pairs by key (the first, if a key repeats), indexed on its first lookup. Scanning the pairs for
 * every path made locating each problem of a 15,000-task DAG quadratic: refusing one whose every task named an
 * unknown task held the server 5 s.
 */
const pairsByKey = new WeakMap<YAMLMap, Map<unknown, Pair>>();

function pairOf(map: YAMLMap, key: string | number): Pair | undefined {
  let index = pairsByKey.get(map);
  if (!index) {
    index = new Map();
    for (const p of map.items) {
      if (!isPair(p)) continue;
      const k = isScalar(p.key) ? p.key.value : p.key;
      if (!index.has(k)) index.set(k, p);
    }
    pairsByKey.set(map, index);
  }
  return index.get(key);
}
