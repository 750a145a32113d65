// Test step of dags/repo-audit.yaml: the report file the task names holds exactly
// the Markdown it returned, and has at least one table row.
import { readFileSync } from 'node:fs';

const output = JSON.parse(readFileSync(process.env.DAGENT_OUTPUT_FILE, 'utf8'));
const onDisk = readFileSync(output.path, 'utf8');
if (onDisk !== output.markdown) {
  console.error(`${output.path} differs from the Markdown the task returned`);
  process.exit(1);
}
if (!/^\|.*\|$/m.test(onDisk)) {
  console.error(`${output.path} has no table`);
  process.exit(1);
}
console.log(`${output.path}: ${onDisk.length} bytes, matches the output`);
