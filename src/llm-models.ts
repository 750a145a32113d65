import { z } from 'zod';

/**
 * A model name (`gpt-4o`, `openai/gpt-4o`, `claude-sonnet-4@2025-05-14`): no spaces or commas, so a
 * claim group's key (capabilities, then the models a task accepts) stays unambiguous.
 */
export const MODEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/;
export const modelNameSchema = z.string().regex(MODEL_PATTERN, { error: 'must be a model name like gpt-4o or openai/gpt-4o (letters, digits and . _ : / @ + -, at most 200)' });

/** What an agent registers it can use: model names, or `*` for any model (a gateway that routes every name). */
export const agentModelSchema = z.union([z.literal('*'), modelNameSchema], { error: 'must be a model name like gpt-4o or openai/gpt-4o, or * for any model' });
