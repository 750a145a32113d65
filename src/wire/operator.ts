import { z } from 'zod';

/**
 * The fields of what people and operators ask for, one definition for each way they ask: the HTTP API's bodies
 * (src/http/routes/humans.ts, approvals.ts) and the MCP operator tools' arguments (src/mcp/operator-tools.ts).
 */

const scalar = z.union([z.string(), z.number(), z.boolean()]);
/** A param's value; a list param's is a list (it reaches the loader as the CLI's `--param repos='["a","b"]'` does). */
export const paramValue = z.union([scalar, z.array(scalar).max(10_000)]);

/** Why a person resolved a dead letter as they did: kept with the resolution. */
export const resolutionNote = z.string().max(2000);

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
  comment: comment.min(1).describe('what is wrong: the retry\'s agent reads it in its previous attempts'),
};
