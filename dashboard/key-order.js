// @ts-check
// The order the dashboard lists task keys in, as the server does (src/model/task-key-order.ts taskKeyCompare, which
// this copies: the dashboard imports nothing from the server): each run of digits compared as the number it writes
// (w0, w1, w2, …, w10), other characters by their codes, a digit before any of them; keys equal as numbers (w01, w1)
// by their text. test/model/task-key-order.test.ts holds the two to the same order.

const ZERO = 48;
/** @param {number} c */
const isDigit = (c) => c >= ZERO && c <= 57;

/**
 * @param {string} a
 * @param {string} b
 * @returns {number} below 0 when `a` comes first, above 0 when `b` does
 */
export function keyCompare(a, b) {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(j);
    const da = isDigit(ca);
    const db = isDigit(cb);
    if (da && db) {
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
  const rest = a.length - i - (b.length - j);
  return rest !== 0 ? rest : a < b ? -1 : a > b ? 1 : 0;
}
