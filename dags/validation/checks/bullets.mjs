// Test step of dags/validation/release-notes.yaml: the notes have at least
// MIN_BULLETS "- " bullets and no placeholder left in them.
import { readFileSync } from 'node:fs';

const { text } = JSON.parse(readFileSync(process.env.DAGENT_OUTPUT_FILE, 'utf8'));
const bullets = text.split('\n').filter((l) => l.startsWith('- ')).length;
const min = Number(process.env.MIN_BULLETS ?? 1);
if (bullets < min) {
  console.error(`${bullets} bullet(s); at least ${min} expected`);
  process.exit(1);
}
if (/TODO|TBD|lorem ipsum/i.test(text)) {
  console.error('a placeholder is left in the notes');
  process.exit(1);
}
console.log(`${bullets} bullets`);
