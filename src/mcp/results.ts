import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DagentError } from '../errors.js';

/**
 * A tool's answer: its value as JSON text, or, refused, the reason in words a model acts on. A lost lease says to
 * stop; nothing internal (a stack, a query) ever reaches the model.
 */
export async function toolResult(fn: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    const value = await fn();
    return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }] };
  } catch (err) {
    return { isError: true, content: [{ type: 'text', text: refusalText(err) }] };
  }
}

export function refusalText(err: unknown): string {
  if (!(err instanceof DagentError)) return 'INTERNAL: the server could not do this now; try again later';
  if (err.code === 'LEASE_LOST') return `LEASE_LOST: ${err.message}. This task is no longer yours (its lease lapsed, or it was cancelled or taken back). Stop working on it; do not retry this call. Call next_task for other work.`;
  return `${err.code}: ${err.message}`;
}
