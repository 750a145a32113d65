import type { AgentRow, AttemptRow, DagRow, DeadLetterRow, TaskRow, TaskStepRow } from '../rows.js';
import type { agents, attempts, dags, deadLetters, tasks, taskSteps } from './index.js';

// Compile-time only: each plain row type in db/rows.ts is exactly drizzle's inferred one.
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
export type RowsMatch = [
  Same<TaskRow, typeof tasks.$inferSelect>,
  Same<AgentRow, typeof agents.$inferSelect>,
  Same<DeadLetterRow, typeof deadLetters.$inferSelect>,
  Same<DagRow, typeof dags.$inferSelect>,
  Same<AttemptRow, typeof attempts.$inferSelect>,
  Same<TaskStepRow, typeof taskSteps.$inferSelect>,
] extends [true, true, true, true, true, true] ? true : never;
export const rowsMatch: RowsMatch = true;
