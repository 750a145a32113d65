import { z } from 'zod';

/** What the operations routes answer (src/http/routes/metrics.ts, openapi.ts), and the plain acknowledgement other routes share. */

/** Done: nothing more to say. */
export const okAnswerSchema = z.object({ ok: z.literal(true) });
export type OkAnswer = z.infer<typeof okAnswerSchema>;

/** An OpenAPI 3.1 document (this one's: src/http/openapi.ts). */
export const openApiAnswerSchema = z.looseObject({
  openapi: z.string(),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.unknown()),
});
