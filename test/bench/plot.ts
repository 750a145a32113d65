import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** One horizontal bar chart as a standalone SVG: a bar per system, the value printed at its end. */
export function barChartSvg(title: string, unit: string, bars: Array<{ label: string; value: number }>): string {
  const width = 760;
  const rowH = 28;
  const left = 330;
  const top = 40;
  const max = Math.max(...bars.map((b) => (Number.isFinite(b.value) ? b.value : 0)), 1e-9);
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const rows = bars.map((b, i) => {
    const y = top + i * rowH;
    const w = Number.isFinite(b.value) ? ((width - left - 110) * b.value) / max : 0;
    const shown = Number.isFinite(b.value) ? `${b.value >= 100 ? Math.round(b.value).toLocaleString('en-US') : b.value.toFixed(2)} ${unit}` : 'n/a';
    return `<text x="${left - 8}" y="${y + 17}" text-anchor="end">${esc(b.label)}</text>`
      + `<rect x="${left}" y="${y + 4}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${i === 0 ? '#2b6cb0' : '#a0aec0'}"/>`
      + `<text x="${(left + w + 6).toFixed(1)}" y="${y + 17}">${esc(shown)}</text>`;
  });
  const height = top + bars.length * rowH + 12;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="13">`
    + `<rect width="100%" height="100%" fill="white"/><text x="12" y="24" font-weight="bold">${esc(title)}</text>${rows.join('')}</svg>\n`;
}

export function plotWrite(dir: string, name: string, svg: string): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.svg`);
  writeFileSync(file, svg);
  return file;
}
