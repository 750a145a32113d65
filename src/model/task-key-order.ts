import { sql, type SQL, type SQLWrapper } from 'drizzle-orm';

/**
 * The order task keys are listed in (`dagent status`, `dagent tasks`, the API's task lists, the timeline): natural,
 * each run of digits compared as the number it writes, so w2 comes before w10 (w0, w1, w2, …, w10, where plain text
 * order gives w0, w1, w10, w100, w101, …, w2). Other characters compare by their codes, as PostgreSQL's "C" collation
 * does, except that a digit comes before any of them (w1 before w-1 and wa); keys equal as numbers (w01, w1) by their
 * text. Two forms of one order: taskKeyCompare in TypeScript, taskKeyOrderSql for a statement that must order (and
 * cut) in PostgreSQL; the browser's copy is dashboard/key-order.js. test/model/task-key-order.test.ts holds the
 * three to the same order.
 */
export function taskKeyCompare(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(j);
    const da = isDigit(ca);
    const db = isDigit(cb);
    if (da && db) {
      // Two numbers: leading zeros skipped, the longer is larger, else the first digit that differs decides.
      let si = i;
      while (a.charCodeAt(si) === ZERO) si++;
      let sj = j;
      while (b.charCodeAt(sj) === ZERO) sj++;
      let ei = si;
      while (ei < a.length && isDigit(a.charCodeAt(ei))) ei++;
      let ej = sj;
      while (ej < b.length && isDigit(b.charCodeAt(ej))) ej++;
      if (ei - si !== ej - sj) return ei - si - (ej - sj);
      for (let k = 0; k < ei - si; k++) {
        const d = a.charCodeAt(si + k) - b.charCodeAt(sj + k);
        if (d !== 0) return d;
      }
      i = ei;
      j = ej;
    } else if (da !== db) {
      return da ? -1 : 1;
    } else {
      if (ca !== cb) return ca - cb;
      i++;
      j++;
    }
  }
  // One ran out: the shorter first; keys equal as numbers by their text (w01 before w1).
  const rest = a.length - i - (b.length - j);
  return rest !== 0 ? rest : a < b ? -1 : a > b ? 1 : 0;
}

const ZERO = 48;
const isDigit = (c: number) => c >= ZERO && c <= 57;

/**
 * taskKeyCompare as ORDER BY terms on the key column `key`: the key as an array of its runs, each number as its
 * length (three digits) and its digits without leading zeros, compared in the "C" collation, then the key itself.
 * A key begins with a letter (dag/file-schema.ts KEY_PATTERN), so the runs of two keys alternate alike (text, number,
 * text, …) and a number is only ever compared with a number. About 7 µs a row on 2 cores: an ORDER BY that cuts a
 * long list computes it on the rows near the cut only (tasks-read.ts taskList).
 */
export function taskKeyOrderSql(key: SQLWrapper): SQL {
  return sql`array(
      select case when r[1] ~ '^[0-9]' then lpad(length(ltrim(r[1], '0'))::text, 3, '0') || ltrim(r[1], '0') else r[1] end
      from regexp_matches(${key}, '[0-9]+|[^0-9]+', 'g') as r
    ) collate "C", ${key} collate "C"`;
}
