import { z } from 'zod';
import { TOKEN_ROLES } from '../auth/tokens.js';

/** What GET /api/whoami answers (src/http/routes/whoami.ts): the token presented. */
export const whoamiAnswerSchema = z.object({
  tokenId: z.string(),
  role: z.enum(TOKEN_ROLES),
  agentId: z.string().nullable().describe('the agent an agent token acts as; null for other roles'),
  grant: z.object({
    capabilities: z.array(z.string()).nullable().describe('capabilities it may register; null: any but validator ones (a token made before grants)'),
    validators: z.array(z.string()),
    models: z.array(z.string()).nullable().describe('models it may register (`*`: any); null: any (a token made before models were granted)'),
    budgetUsd: z.number().nullable(),
    maxConcurrent: z.number().nullable(),
  }).nullable().describe('an agent token\'s grant; null for other roles'),
  tenants: z.array(z.string()).nullable().describe('the tenants it reads and acts on (an agent token: those its agent may serve); null: every tenant'),
});
export type WhoamiAnswer = z.infer<typeof whoamiAnswerSchema>;
