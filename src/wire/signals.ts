import { z } from 'zod';
import { instant } from './instant.js';

/** What the signal route answers (src/http/routes/signals.ts), as sent (engine/waits/signals.ts). */
export const signalAnswerSchema = z.object({
  key: z.string(),
  completed: z.array(z.object({ id: z.string(), dagId: z.string(), key: z.string() })).describe('the tasks it completed now'),
  receivedAt: instant.describe('when it was recorded; a task that begins waiting on the key later completes with it if created before'),
});
export type SignalAnswer = z.infer<typeof signalAnswerSchema>;
