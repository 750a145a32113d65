import { z } from 'zod';
import { instantInput } from './instant.js';

/**
 * The fields of what people and operators ask for, one definition for each way they ask: the HTTP API's bodies
 * (src/http/routes/dags.ts, tasks.ts, dlq.ts, approvals.ts) and the MCP operator tools' arguments (src/mcp/operator-tools.ts).
 */

const scalar = z.union([z.string(), z.number(), z.boolean()]);
/** A param's value; a list param's is a list (it reaches the loader as the CLI's `--param repos='["a","b"]'` does). */
export const paramValue = z.union([scalar, z.array(scalar).max(10_000)]);

/** Why a person resolved a dead letter, cancelled or re-ran something as they did: kept with the resolution or the event. */
export const resolutionNote = z.string().max(2000);

/** A page's length in the lists (query `limit`). */
export const listLimit = z.coerce.number().int().min(1).max(1000).optional();

/** What the long lists (DAGs, dead letters) are searched and paged by. */
export const listQuery = {
  q: z.string().min(1).max(200).optional().describe('search: an id, or part of a name (DAGs: name or title; dead letters: task key or reason), any case'),
  from: instantInput.optional().describe('created at or after this instant (ISO 8601 with offset)'),
  to: instantInput.optional().describe('created before this instant'),
  cursor: z.string().max(400).optional().describe('the `next` of the previous page'),
};

/** A base priority a person sets on a task, or on every unfinished task of a DAG. */
export const priorityFields = { priority: z.number().int().min(0).max(100).describe('0 is most urgent') };

export const dlqRetryFields = {
  note: resolutionNote.optional(),
  reset_attempts: z.boolean().optional().describe('give the task a fresh attempt budget'),
};

export const dlqCancelFields = { note: resolutionNote.optional() };

const comment = z.string().max(10_000);

export const approveFields = {
  comment: comment.optional(),
  output: z.unknown().optional().describe('replaces the output before it is approved (where the step allows editing); later steps check it'),
};

export const rejectFields = {
  comment: comment.refine((c) => c.trim().length > 0, { error: 'a rejection needs a comment: it is what the retry is told to fix' })
    .describe('what is wrong: the retry\'s agent reads it in its previous attempts'),
};
