/**
 * Answers written out by hand in one protocol, for tests that send them themselves with `llmSend(req.res, …)` from
 * `server.reply`. Scripted replies (`answer`, `fault` in ./reply.ts) say the same in every protocol at once.
 */

/** A chat.completion body answering `text`, with token usage (`cached`: of the input, those OpenAI's prompt cache served). */
export function llmCompletion(text: string | null, input: number, output: number, cached?: number) {
  return {
    id: 'c1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text } }],
    usage: { prompt_tokens: input, completion_tokens: output, ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }) },
  };
}

/** An Anthropic Messages answer (POST /v1/messages): `input` excludes the cache's parts, as Anthropic counts them. */
export function anthropicMessage(text: string, usage: { input: number; output: number; cacheRead?: number; cacheWrite?: number }) {
  return {
    id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-test', content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output, cache_creation_input_tokens: usage.cacheWrite ?? 0, cache_read_input_tokens: usage.cacheRead ?? 0 },
  };
}

/** Anthropic's error body (`type`: rate_limit_error, authentication_error, …). */
export const anthropicError = (type: string, message: string) => ({ type: 'error', error: { type, message } });

/** A Google generateContent answer: `prompt` counts every input token, the cached ones included, as Google counts them. */
export function googleContent(text: string, usage: { prompt: number; candidates: number; cached?: number }) {
  return {
    candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: {
      promptTokenCount: usage.prompt, candidatesTokenCount: usage.candidates, totalTokenCount: usage.prompt + usage.candidates,
      ...(usage.cached === undefined ? {} : { cachedContentTokenCount: usage.cached }),
    },
    modelVersion: 'gemini-test',
  };
}

/** Google's error body. */
export const googleError = (code: number, status: string, message: string) => ({ error: { code, status, message } });
